# hardex: difficulty-aware data selection for GRPO post-training.
# datasets -> probe -> select -> train -> evaluate -> report. See docs/architecture.md.
from snakemake.utils import min_version

min_version("9.0")


# config.yaml is the embedded default; a --configfile replaces it rather than merging into it,
# so an experiment never inherits the default's models or tasks.
if not workflow.config_settings.configfiles:
    # Snakemake's own message for a YAML mistake names no file and no line (a --configfile's is read before this)
    import sys

    sys.path.insert(0, str(Path(workflow.basedir) / "src"))
    from hardex.config import yaml_syntax_error

    if error := yaml_syntax_error(Path(workflow.basedir) / "config.yaml"):
        sys.exit(f"hardex: config error: {error}")

    configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/models.smk"
include: "rules/probe.smk"
include: "rules/select.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/report.smk"
include: "rules/sequential.smk"
include: "rules/survey.smk"


report: "report/workflow.rst"


onsuccess:
    announce_headline()


rule all:
    default_target: True
    input:
        PROBE_FILES,
        SUBSET_FILES,
        BASE_FILES,
        EVAL_FILES,
        REPORT_TARGETS,
