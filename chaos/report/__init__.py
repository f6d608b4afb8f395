"""The report role: Allure results of raychaos tests, the HTML summary, the timeline pictures.

While tests run (pytest):
  allure.py      the pytest hooks (registered by chaos.plugin); inert without raychaos tests
  labels.py      uses_raychaos(item); the one labelling path (label_running_test, label_claims)
  claims.py      claim id → family (feature, docs, severity); claim_labels, claim_links
  identity.py    allure-pytest's fullName/historyId/testCaseId…, from public pytest data
  crash.py       the broken result of a test whose xdist worker died
  runfiles.py    categories.json, executor.json, environment.properties (merged, not replaced)
  categories.py  Allure categories, shared with the HTML page (findings, fixed findings first)
  properties.py  Java .properties: write, read, merge
  steps.py       step(title): the Allure step of a harness action (no-op without Allure)
  nodelogs.py    every node's logs, attached when a test failed
After a run (``raychaos report``):
  model.py       an Allure results directory loaded: TestResult, Results, load_results
  matrix.py      claim × Ray version → worst result; measurements
  html.py        render_html, write_report
  timeline.py    the history as a picture, measured windows against their bands
  catalogue.py   the claim catalogue (fixtures/claims.toml): ids, faults, outcomes, scope
  coverage.py    per claim and release: verified, finding, skipped, failed, missing
  compare.py     two runs (or two releases in one) claim by claim: regressions and fixes
  cli_commands.py  `raychaos claims | coverage | compare | upgrade-check`
"""
