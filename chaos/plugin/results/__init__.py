"""What the plugin writes into a results directory while tests run (``chaos.report`` only
reads and renders results; a contract forbids it pytest and allure-pytest):

  item_labels.py  a test's labels from its markers and the catalogue (labels_of, claims_of)
  identity.py     allure-pytest's fullName/historyId/testCaseId…, from public pytest data
  crash.py        the broken result of a test whose xdist worker died
  runfiles.py     categories.json, executor.json, environment.properties (merged, not replaced;
                  the engines' facts are asked by the plugin, never here)
  hostcpu.py      the host's CPU counters at session start and finish (raychaos-cpu.json)
  timing.py       the ``raychaos timing`` attachment: boot, slot queue, teardown, node CPU
  nodelogs.py     every node's logs, attached when a test failed
"""
