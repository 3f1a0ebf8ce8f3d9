"""route and deliver throughput: records/s of one `pagestream agents` worker, and one
versus two workers (the ratio), each configuration repeated.

    python -m bench.agents --records 20000            # route and deliver, 3 repeats
    python -m bench.agents --agent route --repeats 5
    python -m bench.agents --nodes 3 --workers 1 --workers 2 --workers 4

Starts its own throw-away broker (free ports, temp dir; --nodes brokers, whose topics
then have min(3, nodes) copies, two in sync with three) unless --bootstrap is
given, and waits for its group coordinator (a fresh broker creates
__consumer_offsets on the first group request; until then every group_lag call
blocks for its 30 s timeout). For each agent the configurations alternate (1
worker, 2 workers, 1, 2, ...; or the --workers counts, one always among them)
--repeats times, so a slow phase of the machine
hits both; each run gets a fresh topic prefix (`topics_apply.apply`) and the
same work, small records of single-page documents:
- route: --records PageState records of operation `process` with an orientation
  result go to docs.oriented, so next_step() sends every one to gpu.classify
  (plus its docs.progress record). Nobody consumes gpu.classify: only the route
  agent works (it decodes, routes and re-encodes; it never reads the image blob,
  so the BlobRef points at a file that does not exist);
- deliver: --records classified pages of one-page `classify` documents go to
  docs.pages.done; deliver ends each document (a DocumentResult on docs.results,
  two docs.progress records, table writes and their changelog). The leader's
  deadline ticks are turned off (they would add records to docs.pages.done);
- --no-progress: the workers write no docs.progress records (the setting
  `progress_events`), to see what they cost;
- doc_id (the key) differs per record, so they spread over all partitions. K
  `pagestream agents` subprocesses run against them. By default they start
  first, and the records are produced once the consumer group
  ("<prefix><app_id>") is stable with K members owning every input partition;
  with --prefill the records are there before the workers start. Every ~0.2 s
  the bench reads the group's offsets with `streams.operations.lag.group_lag`. Done: the
  committed offset equals the log end on every input partition. At the end the
  output topic must hold at least --records records (at-least-once: more is
  possible after a rebalance) and docs.dlq none.

Why not --prefill by default: with a backlog present while two workers join,
the first worker starts alone and the second one's join rebalances the group
mid-run; `streams/agents/consumer.py` exists because faust once stranded
partitions there. --prefill exercises that path.

Reported per run:
- start s: from starting the processes to the stable group (interpreter and
  faust boot, group join); not working, so not in the rates ("-" with --prefill);
- total s: from the first record produced (with --prefill: from starting the
  processes) to done;
- steady s and rec/s commits: from the first poll that sees a committed offset
  on the input topic to done, and the records committed in that window. faust
  commits on a timer (broker_commit_interval, 2.8 s by default, or every 10 000
  records), so both ends fall on commit ticks: the window can overshoot the real
  end of the work by up to one interval, which understates the rate of a run
  that lasts only a few intervals;
- rec/s outputs: the same over the outputs, from the first poll that sees a
  record in the output topic to the poll that sees --records of them (records
  appended in that window / its length). Outputs are acknowledged before their
  input is committed, so this has the poll's resolution (~0.2 s), not the
  timer's: the figure compared with the targets;
- rec/CPU-s: records per second of the workers' CPU time (user + system, all
  threads, from /proc) between the first record produced and done: what a worker
  does with a core to itself. On a machine shared with the broker and other
  work it is the steadier figure (the wall-clock rates move with the neighbours).

Then per agent the median and the spread (min-max) of each configuration's rate
and of the two/one ratio (one per repeat), each beside its target. The ratio is
bounded by the machine: on 2 cores the broker (a JVM that appends and serves
every record) and this bench's polling share the CPUs with the workers, so two
CPU-bound workers cannot reach twice one worker's rate there.

Modules: work.py is what each agent is fed (its input records) and where it writes;
run.py is one configuration's run (topics, workers, the polling until done);
figures.py holds a run's figures and prints the tables; __main__.py is the command.
"""
