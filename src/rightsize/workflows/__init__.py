"""Workflows: the steps a command runs, as functions a notebook can call (the CLI only parses and prints).

rightsize.workflows.plan.plan_spec        spec -> PlanResult (+ the report's evidence)
rightsize.workflows.validate.validate_spec  plan -> local server -> measured vs predicted
rightsize.workflows.validate_run.validate_config  one served configuration, level by level
"""
