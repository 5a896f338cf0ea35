r"""An example reward hook: `tasks.<task>.reward: docs/examples/reward_hook.py:reward`.

hardex calls it in training once per completion, as it calls the task's scorer: the completion's text, the
example's reference answer and the rendered prompt (chat template included). It returns a number, which
`grpo.reward_scale` multiplies. Evaluation still scores with the task's scorer.
"""

import re


def reward(completion: str, answer: str, prompt: str) -> float:
    r"""1 for the reference in the last \boxed{}, 0.1 for another boxed answer (the form asked for), else 0."""
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", completion)
    if not boxes:
        return 0.0
    return 1.0 if boxes[-1].strip() == answer.strip() else 0.1
