"""The code-interpreter loop end to end, in Python: a sandbox from the `code-interpreter` template,
the data and the analysis code a model wrote, run as a cell; back come describe() as text and a
bar chart as PNG, which is saved next to this run.

    forkbox up                                              # once
    PYTHONPATH=python python3 examples/python/code_interpreter.py [out.png]
"""

import base64
import sys

from forkbox import Sandbox

CSV = """region,month,revenue
north,jan,120
north,feb,135
south,jan,90
south,feb,110
east,jan,150
east,feb,160
west,jan,70
west,feb,95
"""

MODEL_CODE = """
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
"""

out = sys.argv[1] if len(sys.argv) > 1 else "revenue-by-region.png"
with Sandbox.create(template="code-interpreter", ttl_seconds=300) as sbx:
    sbx.files.write("/work/sales.csv", CSV)
    execution = sbx.run_code(MODEL_CODE, on_stdout=lambda text: print(text, end=""))
    if execution.error:
        sys.exit(f"{execution.error.name}: {execution.error.value}\n{execution.error.traceback}")
    chart = next(r for r in execution.results if r.png)
    with open(out, "wb") as f:
        f.write(base64.b64decode(chart.png))
    print(f"totals: {execution.text}")
    print(f"chart saved to {out}")
