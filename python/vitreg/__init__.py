"""vitreg: a CPU Vision Transformer feature extractor built to show and remove attention artifacts.

    m = vitreg.Model.from_pretrained("vitreg-untrained-s14-d192-reg4")  # or vitreg.Model(name, **options)
    x = m.preprocess("cat.jpg")                           # float32 [3, 224, 224]
    out = m(x[None])                                      # cls, pooled, registers, patch (as m.forward)
    tr = m.trace(x[None], attention_layers="all", queries=["cls"], norms=True)
    feats = m.get_intermediate_layers(x[None], n=4, reshape=True)   # DINOv2's hub call
    vitreg.extract(m, ["images/"], "out/", patch_tokens=True, progress=True)
    vitreg.explore([m, "vitreg-untrained-s14-d192-reg4@softmax1"], "cat.jpg")   # inline in Jupyter
    stats = vitreg.compare([m, "vitreg-untrained-s14-d192-reg4@softmax1"], "cat.jpg")

Pixels go in as any float32 C-contiguous array-like (numpy, a torch tensor, a memoryview), read in
place; features come out as numpy arrays that own their memory (torch.from_numpy takes them as
they are). Errors are vitreg.Error (CheckpointError, ConfigError, ImageError, IoError, UsageError
under it).
"""
# Every public name of the compiled module, so that a new binding needs no line here.
from ._vitreg import *  # noqa: F401,F403
from ._vitreg import __version__  # noqa: F401
from .aliases import Model, list_models  # noqa: F401

from . import _vitreg


def _name_types_as_vitreg():
    """Classes print as vitreg.X (as users import them), not as the compiled module's."""
    for name in dir(_vitreg):
        value = getattr(_vitreg, name)
        if isinstance(value, type) and not name.startswith("_"):
            value.__module__ = __name__


_name_types_as_vitreg()
Model.__module__ = __name__
