"""``kmirror verify``: does a consumer of the destination read exactly what the source holds?

Its parts, in the order the data flows:

- :mod:`.plan`: from the job's offset syncs and commits (on the destination), which source
  ranges were copied to which destination ranges, and who the job's producers are.
- :mod:`.rows`: the one reader of both clusters: each record of a range as a small row of
  hashes (identity, key and time, key), its offset, sync entry and producer; counts of what
  lies outside the ranges, from batch headers.
- :mod:`.compare`: the comparison on Spark, one topic pair at a time: rows read on executors,
  paired by identity, checked for placement and order; findings with counts and first
  offsets. It lives here, not in :mod:`mirror.spark` (the mirror's streaming source and
  driver), because it is the verifier's engine: only a Spark session is shared with the job.
- :mod:`.report`: the findings' kinds, which of them fail (delivery mode, the topic's owner,
  ``--strict``), the tables and the JSON.
- :mod:`.cli`: ``kmirror verify`` itself: options, planning, Spark, report, exit code.
- :mod:`.demo_checks`: what ``./dev demo`` checks beyond the records (LogAppendTime stamps,
  byte-identical batches, routes, a group resumed at the destination), read with
  :mod:`.rows`' reader.

``kmirror bench verify`` (its time and memory) is in :mod:`mirror.bench.verify_bench`, with the
other benches.
"""
