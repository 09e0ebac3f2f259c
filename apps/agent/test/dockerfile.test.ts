// planDockerfile: every supported instruction becomes the expected plan; every unsupported one an error with its line.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { planDockerfile } from '../src/templates/dockerfile.ts'
import type { DockerfileProblem } from '../src/templates/dockerfile-plan.ts'

function problems(text: string, buildArgs?: Record<string, string>): DockerfileProblem[] {
  try {
    planDockerfile(text, { buildArgs })
  } catch (e) {
    assert.ok(e instanceof AppError, String(e))
    assert.equal(e.code, 'VALIDATION_FAILED')
    const list = e.details?.problems
    assert.ok(Array.isArray(list))
    return list as DockerfileProblem[]
  }
  assert.fail('expected the Dockerfile to be refused')
}

const full = `# syntax=docker/dockerfile:1
# a comment
ARG BASE=debian:12-slim
ARG VERSION
FROM \${BASE} AS build
ARG VERSION
ARG OUT=/out
WORKDIR /src
COPY --chown=1000:1000 --chmod=644 app.py lib/ ./
RUN make \\
    all
RUN ["python3", "-c", "print(1)"]
RUN <<EOF
echo one
echo two
EOF

FROM forkbox:base
LABEL org.example.name="demo app" version=$VERSION
ENV APP_HOME=/app PORT=8080
ENV LEGACY legacy value
WORKDIR $APP_HOME
WORKDIR sub
USER 1000:1000
COPY --from=build /out/app \${APP_HOME}/bin/
ADD vendor.tar.gz /opt/
ADD notes.txt /opt/notes.txt
EXPOSE 8080/tcp \${PORT} 9000
ENTRYPOINT ["/app/bin/app"]
CMD ["--port", "8080"]
HEALTHCHECK CMD curl -fsS http://localhost:8080/health
`

/** A RUN of the first stage of `full`: the two in-scope ARGs are its env and its build args. */
function buildRun(line: number, argv: string[]) {
  const args = { VERSION: '1.2', OUT: '/out' }
  return { op: 'run', line, argv, env: args, workdir: '/src', user: undefined, buildArgs: args }
}

describe('planDockerfile', () => {
  it('plans a Dockerfile using every supported instruction', () => {
    const plan = planDockerfile(full, { buildArgs: { VERSION: '1.2' } })
    assert.deepEqual(plan, {
      stages: [
        {
          index: 0,
          name: 'build',
          line: 5,
          from: { kind: 'image', ref: 'debian:12-slim' },
          steps: [
            { op: 'workdir', line: 8, path: '/src', buildArgs: {} },
            {
              op: 'copy',
              line: 9,
              add: false,
              sources: ['app.py', 'lib'],
              dest: '/src/',
              from: undefined,
              chown: '1000:1000',
              chmod: '644',
              extract: false,
              buildArgs: {},
            },
            buildRun(10, ['/bin/sh', '-c', 'make     all']),
            buildRun(12, ['python3', '-c', 'print(1)']),
            buildRun(13, ['/bin/sh', '-c', 'echo one\necho two\n']),
          ],
          config: {
            env: {},
            workdir: '/src',
            user: undefined,
            exposedPorts: [],
            cmd: undefined,
            entrypoint: undefined,
            healthcheck: undefined,
            labels: {},
          },
        },
        {
          index: 1,
          name: undefined,
          line: 18,
          from: { kind: 'template', name: 'base' },
          steps: [
            { op: 'workdir', line: 22, path: '/app', buildArgs: {} },
            { op: 'workdir', line: 23, path: '/app/sub', buildArgs: {} },
            {
              op: 'copy',
              line: 25,
              add: false,
              sources: ['out/app'],
              dest: '/app/bin/',
              from: { kind: 'stage', index: 0 },
              chown: undefined,
              chmod: undefined,
              extract: false,
              buildArgs: {},
            },
            {
              op: 'copy',
              line: 26,
              add: true,
              sources: ['vendor.tar.gz'],
              dest: '/opt/',
              from: undefined,
              chown: undefined,
              chmod: undefined,
              extract: true,
              buildArgs: {},
            },
            {
              op: 'copy',
              line: 27,
              add: true,
              sources: ['notes.txt'],
              dest: '/opt/notes.txt',
              from: undefined,
              chown: undefined,
              chmod: undefined,
              extract: false,
              buildArgs: {},
            },
          ],
          config: {
            env: { APP_HOME: '/app', PORT: '8080', LEGACY: 'legacy value' },
            workdir: '/app/sub',
            user: '1000:1000',
            exposedPorts: [8080, 9000],
            cmd: ['--port', '8080'],
            entrypoint: ['/app/bin/app'],
            healthcheck: ['/bin/sh', '-c', 'curl -fsS http://localhost:8080/health'],
            // VERSION was declared before the first FROM only, so it is not in scope here.
            labels: { 'org.example.name': 'demo app', version: '' },
          },
        },
      ],
      target: 1,
      startCmd: ['/app/bin/app', '--port', '8080'],
      readyCmd: ['/bin/sh', '-c', 'curl -fsS http://localhost:8080/health'],
      exposedPorts: [8080, 9000],
      labels: { 'org.example.name': 'demo app', version: '' },
    })
  })

  it('refuses each unsupported instruction with its line, all at once', () => {
    const text = [
      'FROM debian', // 1
      'VOLUME /data', // 2
      'ONBUILD RUN x', // 3
      'SHELL ["/bin/bash", "-c"]', // 4
      'STOPSIGNAL SIGKILL', // 5
      'HEALTHCHECK --interval=5s CMD true', // 6
      'FROBNICATE now', // 7
      'COPY --link a /a', // 8
      'COPY --parents a /a', // 9
      'ADD https://example.com/x.tgz /x', // 10
      'RUN --mount=type=cache,target=/c true', // 11
      'EXPOSE 53/udp', // 12
      'MAINTAINER me', // 13
      'COPY <<EOT /f', // 14
      'hi', // 15
      'EOT', // 16
      'FROM --platform=linux/arm64 debian', // 17
      'EXPOSE 80-90', // 18
      'ADD --checksum=sha256:00 a /a', // 19
      'ENV ONLY_A_NAME', // 20
      'LABEL', // 21
    ].join('\n')
    const got = problems(text)
    assert.deepEqual(
      got.map((p) => p.line),
      [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 17, 18, 19, 20, 21],
    )
    for (const p of got) assert.ok(p.message.length > 10, p.message)
    assert.match(got.find((p) => p.line === 10)?.message ?? '', /URL/)
    assert.match(got.find((p) => p.line === 12)?.message ?? '', /TCP/)
  })

  it('keeps checking the lines after a bad FROM', () => {
    assert.deepEqual(
      problems('FROM --platform=linux/arm64 a\nVOLUME /x\nFROM b AS x\nFROM c AS X\n').map((p) => p.line),
      [1, 2, 4],
    )
  })

  it('names the first problem and its line in the message', () => {
    try {
      planDockerfile('FROM debian\nRUN true\nVOLUME /x\n')
      assert.fail('expected an error')
    } catch (e) {
      assert.ok(e instanceof AppError)
      assert.match(e.message, /line 3: VOLUME/)
    }
  })

  it('refuses instructions before FROM and a missing FROM', () => {
    assert.deepEqual(
      problems('RUN true\nFROM x\n').map((p) => p.line),
      [1],
    )
    assert.match(problems('# only a comment\n')[0]?.message ?? '', /no FROM/)
  })

  it('resolves COPY --from by name, by index, and refuses a copy from its own stage', () => {
    const plan = planDockerfile('FROM a AS one\nFROM b\nCOPY --from=0 /x /x\nCOPY --from=ONE /y /y\n')
    const steps = plan.stages[1]?.steps ?? []
    assert.deepEqual(
      steps.map((s) => s.op === 'copy' && s.from),
      [
        { kind: 'stage', index: 0 },
        { kind: 'stage', index: 0 },
      ],
    )
    assert.equal(problems('FROM a AS me\nCOPY --from=me /x /x\n')[0]?.line, 2)
  })

  it('refuses sources leaving the context and several sources into a file', () => {
    assert.deepEqual(
      problems('FROM a\nCOPY ../secret /x\nCOPY a b /file\n').map((p) => p.line),
      [2, 3],
    )
  })

  it('combines ENTRYPOINT and CMD as Docker does', () => {
    const start = (text: string) => planDockerfile(`FROM a AS base\n${text}`).startCmd
    assert.deepEqual(start('CMD python app.py'), ['/bin/sh', '-c', 'python app.py'])
    assert.deepEqual(start('ENTRYPOINT ["tini", "--"]\nCMD ["srv"]'), ['tini', '--', 'srv'])
    assert.deepEqual(start('CMD ["srv"]\nENTRYPOINT ["tini"]'), ['tini', 'srv'])
    assert.deepEqual(start('ENTRYPOINT exec srv\nCMD ["ignored"]'), ['/bin/sh', '-c', 'exec srv'])
    // An ENTRYPOINT resets a CMD inherited from the parent stage.
    assert.deepEqual(start('CMD ["old"]\nFROM base\nENTRYPOINT ["new"]'), ['new'])
    assert.equal(start('RUN true'), undefined)
    assert.equal(planDockerfile('FROM a\nHEALTHCHECK NONE\n').readyCmd, null)
  })

  it('runs a heredoc with a command as a shell script that reads it', () => {
    const plan = planDockerfile('FROM a\nRUN python3 <<PY\nprint(1)\nPY\n')
    assert.deepEqual(plan.stages[0]?.steps[0]?.op === 'run' && plan.stages[0].steps[0].argv, [
      '/bin/sh',
      '-c',
      'python3 <<PY\nprint(1)\nPY',
    ])
  })
})
