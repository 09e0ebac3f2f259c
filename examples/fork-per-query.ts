// Load once, fork per query: the expensive state (here a 5-million-row DataFrame; in practice the
// 2 GB dataset a user uploaded) is built once in one sandbox's kernel, then every question runs in
// its own fork, which starts with that kernel state already in memory and cannot disturb the others.
//
//   node --import tsx examples/fork-per-query.ts
import { Sandbox } from '@forkbox/sdk'

await using loaded = await Sandbox.create({ template: 'code-interpreter', ttlSeconds: 600 })
let t0 = performance.now()
await loaded.runCode(`
rng = np.random.default_rng(7)
df = pd.DataFrame({"store": rng.integers(0, 50, 5_000_000), "sales": rng.gamma(2.0, 30.0, 5_000_000)})
`)
console.log(`loaded in ${Math.round(performance.now() - t0)} ms`)

const questions = [
  'df.groupby("store").sales.sum().idxmax()',
  'round(df.sales.mean(), 2)',
  'df = df[df.sales > 100]; len(df)', // a query that mutates its own copy only
]
t0 = performance.now()
const forks = await loaded.fork({ count: questions.length })
console.log(`${forks.length} forks in ${Math.round(performance.now() - t0)} ms`)
try {
  const answers = await Promise.all(forks.map((f, i) => f.runCode(questions[i] as string)))
  for (const [i, a] of answers.entries()) console.log(`${questions[i]} → ${a.error ? a.error.name : a.text}`)
} finally {
  await Promise.all(forks.map((f) => f.kill()))
}
// the original still has all 5 million rows
console.log(`original: ${(await loaded.runCode('len(df)')).text} rows`)
