"""The report role: Allure results of raychaos tests, the HTML summary, the timeline pictures.

Shared with the plugin, which writes results while tests run (chaos.plugin.results):
  claims.py      claim id → family (feature, docs, severity); claim_labels, claim_links
  categories.py  Allure categories, shared with the HTML page (findings, fixed findings first)
  properties.py  Java .properties: write, read, merge
  trials.py      a trial's id and number (``test_x[2.60.0-trial2]``), read back
  patterns.py    split_list: claim patterns (and other lists) as typed
  hostcpu.py     raychaos-cpu.json: the host's CPU over a run (format and reader)
  timing.py      the ``raychaos timing`` attachment's format
After a run (``raychaos report``):
  files.py       the one reader of a results directory's JSON files
  model.py       an Allure results directory loaded: TestResult, Results, load_results
  matrix.py      claim × Ray version → worst result; measurements
  html.py        render_html, write_report (markup.py: the one HTML escape)
  timeline.py    the history as a picture, measured windows against their bands
  catalogue.py   the claim catalogue (fixtures/claims.toml): ids, faults, outcomes, scope
  coverage.py    per claim and release: verified, finding, skipped, failed, missing
  compare.py     two runs (or two releases in one) claim by claim: regressions and fixes
The commands that run these are in chaos.cli; this package only reads and renders (a
contract forbids it pytest and allure-pytest).
"""
