// Which service method serves each operation of the guest's op families (guest-ops.ts): an
// operation added to a family's map with no method here fails to compile, so a new guest op
// cannot reach the protocol and the guest without a service that offers it.

/** For each op of a guest family `Ops`, the name of the method of `Service` that serves it. */
export type ServedBy<Ops, Service> = { readonly [K in keyof Ops]: keyof Service & string }
