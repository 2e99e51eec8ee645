"""Studies: one or several server configurations x cells, relaunch and resume, as a library for the CLI,
the demo and agreement/. Read one way down: `run` (a study as one stored run) -> `configs` (the loop over
server configs: StudyRunner) -> `launch` (one config's life) -> `searches` (capacity searches) -> `cells`
(one cell); `result_files` writes other tools' result files."""
