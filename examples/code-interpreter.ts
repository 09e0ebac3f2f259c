// The code-interpreter loop end to end: a sandbox from the `code-interpreter` template, the data
// and the analysis code a model wrote, run as a cell; back come describe() as text and a bar chart
// as PNG, which is saved next to this run.
//
//   forkbox up                                  # once: starts the server, writes credentials
//   node --import tsx examples/code-interpreter.ts [out.png]
import { writeFileSync } from 'node:fs'
import { Sandbox } from '@forkbox/sdk'

// What the user uploaded, and what the model answered to "plot revenue by region".
const csv = `region,month,revenue
north,jan,120
north,feb,135
south,jan,90
south,feb,110
east,jan,150
east,feb,160
west,jan,70
west,feb,95
`
const modelCode = `
import pandas as pd
import matplotlib.pyplot as plt

df = pd.read_csv("/work/sales.csv")
print(df.describe())

totals = df.groupby("region")["revenue"].sum().sort_values()
totals.plot(kind="bar", color="steelblue", title="Revenue by region")
plt.ylabel("revenue")
plt.tight_layout()
plt.show()
totals.to_dict()
`

const out = process.argv[2] ?? 'revenue-by-region.png'
await using sbx = await Sandbox.create({ template: 'code-interpreter', ttlSeconds: 300 })
await sbx.files.write('/work/sales.csv', csv)
const execution = await sbx.runCode(modelCode, {
  onStdout: (text) => process.stdout.write(text),
  onStderr: (text) => process.stderr.write(text),
})
if (execution.error) {
  console.error(`${execution.error.name}: ${execution.error.value}\n${execution.error.traceback}`)
  process.exit(1)
}
const chart = execution.results.find((r) => r.png)
if (!chart?.png) throw new Error('the cell showed no chart')
writeFileSync(out, Buffer.from(chart.png, 'base64'))
console.log(`totals: ${execution.text}`)
console.log(`chart saved to ${out}`)
