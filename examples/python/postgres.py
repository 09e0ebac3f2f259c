"""A live database per sandbox: the `postgres` template is baked with PostgreSQL 15 running, so a
create is ready for queries at once.

    forkbox up                                         # once
    PYTHONPATH=python python3 examples/python/postgres.py
"""

import time

from forkbox import Sandbox

started = time.perf_counter()
with Sandbox.create(template="postgres", ttl_seconds=300) as db:
    sql = """
    create table orders (id serial primary key, region text, total int);
    insert into orders (region, total) values ('north', 120), ('south', 90), ('north', 135);
    select region || ' ' || sum(total) from orders group by region order by region;
    """
    result = db.exec(["psql", "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql])
    elapsed = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(result.stderr)
    print(result.stdout, end="")
    print(f"create → query answered in {elapsed * 1000:.0f} ms")
