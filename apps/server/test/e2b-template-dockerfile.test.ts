// E2B's build steps as a Dockerfile, rule by rule (the whole flow through the client is e2b-templates.test.ts).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { type E2bBuildStart, readyCheck, registryLogin, translateBuild } from '../src/e2b/template-dockerfile.ts'

const same = (name: string) => name
const SHELL = '["/bin/sh","-c","exec \\"$(command -v bash || echo /bin/sh)\\" -c \\"$1\\"","e2b-step",'

function dockerfile(req: Partial<E2bBuildStart>): string[] {
  const t = translateBuild({ fromImage: 'img:1', steps: [], ...req }, same)
  assert.equal(t.kind, 'dockerfile')
  return t.kind === 'dockerfile' ? t.dockerfile.trimEnd().split('\n') : []
}

describe('E2B steps as a Dockerfile', () => {
  it('moves the workdir with the user until one is set, resolves relative ones, and labels filesystem steps', () => {
    const t = translateBuild(
      {
        fromImage: 'img:1',
        steps: [
          { type: 'USER', args: ['guest'] },
          { type: 'RUN', args: ['pwd'] },
          { type: 'WORKDIR', args: ['src'] },
          { type: 'WORKDIR', args: ['../lib'] },
          { type: 'COPY', args: ['src/**/*.ts', 'out', '', ''], filesHash: 'h1' },
          { type: 'COPY', args: ['./a/../b.txt', '/b.txt', 'root:adm', '644'], filesHash: 'h2' },
        ],
      },
      same,
    )
    assert.equal(t.kind, 'dockerfile')
    if (t.kind !== 'dockerfile') return
    assert.deepEqual(t.dockerfile.trimEnd().split('\n'), [
      'FROM img:1',
      'USER guest',
      'WORKDIR "/home/guest"',
      `RUN ${SHELL}"pwd"]`,
      'WORKDIR "/home/guest/lib"',
      'COPY --chown=guest ["e2b/5/src","out/"]',
      'COPY --chown=root:adm --chmod=644 ["e2b/6/b.txt","/b.txt"]',
    ])
    assert.deepEqual(t.stepLabels, ['2', '2', '5', '5', '6'])
    assert.deepEqual(t.copies, [
      { step: 5, hash: 'h1' },
      { step: 6, hash: 'h2' },
    ])
  })

  it('switches the user for one RUN and back; a template with no steps but a start command still says its user', () => {
    assert.deepEqual(
      dockerfile({
        steps: [
          { type: 'RUN', args: ['id', 'root'] },
          { type: 'RUN', args: ['id'] },
        ],
      }),
      [
        'FROM img:1',
        'USER user',
        'WORKDIR "/home/user"',
        'USER root',
        `RUN ${SHELL}"id"]`,
        'USER user',
        `RUN ${SHELL}"id"]`,
      ],
    )
    assert.deepEqual(dockerfile({ startCmd: 'serve' }), [
      'FROM img:1',
      'USER user',
      'WORKDIR "/home/user"',
      `CMD ${SHELL}"serve"]`,
    ])
  })

  it('refuses what it cannot say on one line or does not know, naming the step', () => {
    const refused: [Partial<E2bBuildStart>, RegExp][] = [
      [{ steps: [{ type: 'ENV', args: ['A', 'x\ny'] }] }, /^step 1: the value of A contains a line break/],
      [{ steps: [{ type: 'ENV', args: ['A B', 'x'] }] }, /^step 1: "A B" is not an environment variable name/],
      [{ steps: [{ type: 'ENV', args: ['A'] }] }, /^step 1: ENV takes name and value pairs/],
      [{ steps: [{ type: 'USER', args: ['root\nRUN x'] }] }, /^step 1: .* is not a user name/],
      [{ steps: [{ type: 'WORKDIR', args: ['/a\r'] }] }, /^step 1: the path contains a line break/],
      [{ steps: [{ type: 'RUN', args: ['true', 'a b'] }] }, /^step 1: "a b" is not a user name/],
      [{ steps: [{ type: 'COPY', args: ['../x', '/x'], filesHash: 'h' }] }, /^step 1: source .* leaves/],
      [{ steps: [{ type: 'COPY', args: ['x', '/x'] }] }, /^step 1: COPY needs the filesHash/],
      [{ steps: [{ type: 'COPY', args: ['x', '/x', '', 'rwx'], filesHash: 'h' }] }, /^step 1: mode "rwx"/],
      [
        {
          steps: [
            { type: 'RUN', args: ['true'] },
            { type: 'ARG', args: [] },
          ],
        },
        /^step 2: step type "ARG" is not/,
      ],
      [{ fromImage: 'img:1\nRUN x' }, /^step base: fromImage contains a line break/],
      [{ fromImage: '--network=host img' }, /^step base: .* is not an image reference/],
      [{ fromTemplate: 'base' }, /exactly one of fromImage or fromTemplate/],
      [{ fromImage: undefined, fromTemplate: 'Bad Name' }, /^step base: "Bad Name" is not a template name/],
    ]
    for (const [req, message] of refused)
      assert.throws(
        () => translateBuild({ fromImage: 'img:1', steps: [], ...req } as E2bBuildStart, same),
        (e: Error) => message.test(e.message),
        JSON.stringify(req),
      )
  })

  it("reads fromImage's registry login; AWS's and GCP's are refused by name, malformed ones as invalid", () => {
    const req = (fromImageRegistry: unknown, fromImage = 'reg:5000/a:1') =>
      ({ fromImage, steps: [], fromImageRegistry }) as E2bBuildStart
    assert.equal(registryLogin(req(undefined)), null)
    assert.equal(registryLogin(req(null)), null)
    assert.deepEqual(registryLogin(req({ type: 'registry', username: 'u', password: 'p' })), {
      username: 'u',
      password: 'p',
    })
    const refused: [unknown, string, string, RegExp][] = [
      [{ type: 'gcp', serviceAccountJson: '{}' }, 'reg:5000/a:1', 'NOT_IMPLEMENTED', /fromGCPRegistry/],
      [{ type: 'aws', awsAccessKeyId: 'a' }, 'reg:5000/a:1', 'NOT_IMPLEMENTED', /fromAWSRegistry/],
      [{ type: 'registry', username: '', password: 'p' }, 'reg:5000/a:1', 'VALIDATION_FAILED', /username, password/],
      [{ type: 'registry', username: 'u', password: 'p' }, '', 'VALIDATION_FAILED', /go with fromImage/],
      ['user:pass', 'reg:5000/a:1', 'VALIDATION_FAILED', /fromImageRegistry takes/],
    ]
    for (const [config, image, code, message] of refused)
      assert.throws(
        () => registryLogin(req(config, image)),
        (e: unknown) => e instanceof AppError && e.code === code && message.test(e.message),
        JSON.stringify(config),
      )
  })

  it("checks E2B's waitForPort in /proc/net, and keeps any other ready command as it is", () => {
    assert.equal(
      readyCheck('[ -n "$(ss -Htuln sport = :5432)" ]'),
      "grep -qsE '^ *[0-9]+: [0-9A-F]+:1538 [0-9A-F]+:[0-9A-F]+ 0A ' /proc/net/tcp /proc/net/tcp6",
    )
    assert.equal(readyCheck('curl -s localhost:3000'), 'curl -s localhost:3000')
    assert.equal(readyCheck('[ -n "$(ss -Htuln sport = :99999)" ]'), '[ -n "$(ss -Htuln sport = :99999)" ]')
  })
})
