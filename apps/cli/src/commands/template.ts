// `forkbox template`: build templates from a Dockerfile, an image or an image archive, list, remove, read build logs.
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { Template, TemplateBuildError } from '@forkbox/sdk'
import type { Command } from 'commander'
import { type BuildDisplay, liveDisplay, plainDisplay } from '../build-display.ts'
import { CliError, formatError } from '../cli-error.ts'
import type { CliContext } from '../context.ts'
import { json, relativeTime, table } from '../format.ts'
import { collectPair } from '../parse.ts'

interface BuildFlags {
  tag: string
  file?: string
  image?: string
  archive?: string
  buildArg?: Record<string, string>
  description?: string
  startCmd?: string
  readyCmd?: string
}

function dockerfileSource(
  context: string,
  flags: BuildFlags,
): { dockerfile?: string; image?: string; archive?: string; context?: string } {
  if (flags.image && flags.archive) throw new CliError('USAGE', 'give --image or --archive, not both')
  if ((flags.image || flags.archive) && flags.file)
    throw new CliError('USAGE', `give ${flags.image ? '--image' : '--archive'} or a Dockerfile (-f), not both`)
  if (flags.image) return { image: flags.image }
  if (flags.archive) return { archive: resolve(flags.archive) }
  const dir = resolve(context)
  const path = flags.file ? resolve(flags.file) : join(dir, 'Dockerfile')
  try {
    return { dockerfile: readFileSync(path, 'utf8'), context: dir }
  } catch (err) {
    throw new CliError('USAGE', `cannot read the Dockerfile ${path}: ${(err as Error).message}`)
  }
}

function registerBuild(template: Command, ctx: CliContext): void {
  template
    .command('build')
    .description(
      "build a template (or its next version) from CONTEXT's Dockerfile, an image or an image archive; prints NAME@VERSION",
    )
    .argument('[context]', 'the build context directory', '.')
    .requiredOption('-t, --tag <name>', 'the template name')
    .option('-f, --file <path>', 'the Dockerfile (default: CONTEXT/Dockerfile)')
    .option('--image <ref>', 'take this OCI/Docker image as it is (no Dockerfile, no context)')
    .option(
      '--archive <file>',
      'take the image in this `docker save` or OCI layout tarball (no Dockerfile, no context)',
    )
    .option('--build-arg <KEY=VALUE>', 'a build argument (repeatable)', collectPair)
    .option('--description <text>', 'what the template is for')
    .option('--start-cmd <cmd>', "started at bake time, running in every sandbox (instead of the image's CMD)")
    .option('--ready-cmd <cmd>', 'must exit 0 before the template is baked (instead of HEALTHCHECK or EXPOSEd ports)')
    .action(async (context: string, flags: BuildFlags) => {
      const source = dockerfileSource(context, flags)
      const display = ctx.progressStream ? liveDisplay(ctx.progressStream, ctx.now) : plainDisplay(ctx.stderr)
      const build = await following(ctx, display, 'it carries on on the server (forkbox template ls)', (signal) =>
        Template.build({
          ...ctx.connection,
          ...source,
          name: flags.tag,
          buildArgs: flags.buildArg,
          description: flags.description,
          startCmd: flags.startCmd,
          readyCmd: flags.readyCmd,
          onLog: (entry) => display.line(entry),
          signal,
        }),
      )
      if (build) ctx.stdout.write(`${build.template}@${build.version}\n`)
    })
}

/**
 * Waits on a build, its lines going to `display`: Ctrl-C stops the waiting (exit 130, `detached`
 * says what became of the build), a failed build is `forkbox: CODE: message` (exit 1) after the
 * display's account of it; either resolves undefined.
 */
async function following<T>(
  ctx: CliContext,
  display: BuildDisplay,
  detached: string,
  wait: (signal: AbortSignal) => Promise<T>,
): Promise<T | undefined> {
  const controller = new AbortController()
  const unsubscribe = ctx.onInterrupt(() => controller.abort())
  try {
    const done = await wait(controller.signal)
    display.finish(false)
    return done
  } catch (err) {
    display.finish(true)
    if (controller.signal.aborted) {
      ctx.stderr.write(`forkbox: stopped following the build; ${detached}\n`)
      ctx.exitCode = 130
    } else if (err instanceof TemplateBuildError) {
      ctx.stderr.write(`forkbox: ${err.code}: ${err.build.error?.message ?? 'the build failed'}\n`)
      ctx.exitCode = 1
    } else throw err
    return undefined
  } finally {
    unsubscribe()
  }
}

export function registerTemplate(program: Command, ctx: CliContext): void {
  const template = program.command('template').description('build and manage templates')
  registerBuild(template, ctx)

  template
    .command('ls')
    .description('list the templates this key can create from')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const list = await Template.list(ctx.connection)
      if (flags.json) {
        ctx.stdout.write(json(list))
        return
      }
      const rows = list.map((t) => [
        t.name,
        t.version === null ? 'built-in' : String(t.version),
        t.id === null ? '-' : t.public ? 'public' : 'private',
        t.description,
      ])
      ctx.stdout.write(table(['NAME', 'VERSION', 'VISIBILITY', 'DESCRIPTION'], rows))
    })

  template
    .command('rm')
    .description('delete templates (every version; running sandboxes carry on)')
    .argument('<name...>', 'template names')
    .action(async (names: string[]) => {
      for (const name of names) {
        try {
          await Template.delete(name, ctx.connection)
          ctx.stdout.write(`${name}\n`)
        } catch (err) {
          ctx.stderr.write(`${formatError(err)}\n`)
          ctx.exitCode = 1
        }
      }
    })

  template
    .command('prune')
    .description(
      'admin key: remove what of the template store nothing uses (old rootfs dirs, snapshots, guests, pulled images) and evict build layers',
    )
    .option('--layers-mb <n>', 'keep at most this much of the build layer cache (default: the host cap)', (v) => {
      const n = Number(v)
      if (!Number.isInteger(n) || n < 0) throw new CliError('USAGE', `--layers-mb takes a whole number of MB, not ${v}`)
      return n
    })
    .option('--json', 'print JSON')
    .action(async (flags: { layersMb?: number; json?: boolean }) => {
      const result = await Template.prune({ ...ctx.connection, layerCacheMB: flags.layersMb })
      if (flags.json) {
        ctx.stdout.write(json(result))
        return
      }
      for (const path of result.removed) ctx.stdout.write(`${path}\n`)
      ctx.stderr.write(`freed ${(result.freedBytes / 2 ** 20).toFixed(1)} MiB in ${result.removed.length} entries\n`)
    })

  template
    .command('builds')
    .description("a template's builds, newest first")
    .argument('<name>', 'template name')
    .action(async (name: string) => {
      const t = await Template.get(name, ctx.connection)
      const now = ctx.now()
      const rows = t.builds.map((b) => [
        b.id,
        String(b.version),
        b.error ? `${b.status} (${b.error.code})` : b.status,
        relativeTime(b.createdAt, now),
      ])
      ctx.stdout.write(table(['BUILD', 'VERSION', 'STATUS', 'CREATED'], rows))
    })

  template
    .command('logs')
    .description("print a build's log; with -f follow it until the build ends (exit 1 if it failed)")
    .argument('<build-id>', 'the build id')
    .option('-f, --follow', 'keep printing new lines until the build ends')
    .action(async (buildId: string, flags: { follow?: boolean }) => {
      const display = plainDisplay(ctx.stdout)
      if (!flags.follow) {
        for (const entry of (await Template.getBuild(buildId, ctx.connection)).logs) display.line(entry)
        return
      }
      await following(ctx, display, 'it carries on on the server', (signal) =>
        Template.waitForBuild(buildId, { ...ctx.connection, onLog: (entry) => display.line(entry), signal }),
      )
    })
}
