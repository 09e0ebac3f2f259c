// An interface's listed methods made from one function: each method is `call` of its name with its
// arguments. How both sides of the agent seam are built from their method lists, signatures never
// restated (the one cast is here; each list is checked against its interface with `satisfies` and
// a completeness check where it is declared).

export function methodCalls<T, M extends keyof T & string>(
  methods: readonly M[],
  call: (method: M, args: unknown[]) => Promise<unknown>,
): Pick<T, M> {
  const calls: Partial<Record<M, (...args: unknown[]) => Promise<unknown>>> = {}
  for (const method of methods) calls[method] = (...args: unknown[]) => call(method, args)
  return calls as Pick<T, M>
}
