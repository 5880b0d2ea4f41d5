"""The names DINOv2, timm and Hugging Face users type, as thin aliases over vitreg's own calls:
Model.from_pretrained, model(x), model.get_intermediate_layers and list_models."""
import inspect
import os

import numpy as np

from . import _vitreg


class Model(_vitreg.Model):
    __doc__ = _vitreg.Model.__doc__

    def __init__(self, model, **options):
        super().__init__(os.fspath(model), **options)

    @classmethod
    def from_pretrained(cls, name_or_path, **options):
        """A model by name (one of vitreg.list_models(), a hub id or torch hub name in the local
        caches) or by path, as Model(name_or_path, **options) opens it."""
        return cls(name_or_path, **options)

    def __call__(self, x, *, threads=None):
        """model(x) is model.forward(x): the dict of final-normed features (cls, pooled,
        registers, patch, and embedding where the model projects)."""
        return self.forward(x, threads=threads)

    def get_intermediate_layers(self, x, n=1, reshape=False, return_class_token=False, norm=True):
        """DINOv2's hub call (dinov2/models/vision_transformer.py), from one traced forward.

        n                   an int: the last n blocks; a sequence: those block indices (0-based; taken in
                            block order, as DINOv2 takes them).
        norm                apply the final norm to each block's output.
        reshape             patch tokens as [B, D, h, w] instead of [B, h*w, D].
        return_class_token  pairs (patch tokens, class token [B, D]) instead of patch tokens alone.
        Returns a tuple, one entry per block, of numpy float32 arrays; registers are left out."""
        depth = self.config["depth"]
        if isinstance(n, (int, np.integer)):
            if not 0 <= n <= depth:
                raise ValueError(f"get_intermediate_layers: n={n}: the model has {depth} blocks")
            layers = list(range(depth - n, depth))
        else:
            asked = [int(i) for i in n]
            # DINOv2 finds each index among 0..depth-1 once, and asserts that it found them all.
            if any(not 0 <= i < depth for i in asked) or len(set(asked)) != len(asked):
                raise ValueError(f"get_intermediate_layers: n={asked}: expected distinct block indices in 0..{depth - 1}")
            layers = sorted(asked)
        if return_class_token and not self.config["class_token"]:
            raise ValueError("get_intermediate_layers: return_class_token: this model has no class token")
        if not layers:
            return ()
        traced = self.trace(x, blocks=layers, blocks_normed=norm, queries=[])
        h, w = traced["grid"]
        blocks = traced["blocks"]  # [layers, B, tokens, D], tokens [CLS, registers, patches]
        patches = blocks[:, :, blocks.shape[2] - h * w:, :]
        if reshape:
            patches = np.ascontiguousarray(patches.reshape(len(layers), -1, h, w, blocks.shape[3]).transpose(0, 1, 4, 2, 3))
        if return_class_token:
            return tuple(zip(patches, blocks[:, :, 0, :]))
        return tuple(patches)


def _init_signature():
    """Model(model, *, evict=None, ...): the keywords of the table of model options, so that help()
    shows them (the compiled __init__ reads them by name)."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                  inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [inspect.Parameter(o["keyword"], keyword, default=o["default"]) for o in _vitreg.model_options()]
    return inspect.Signature(parameters)


Model.__init__.__signature__ = _init_signature()


def list_models():
    """The names of the checkpoints shipped with vitreg, as vitreg.shipped_models()."""
    return _vitreg.shipped_models()
