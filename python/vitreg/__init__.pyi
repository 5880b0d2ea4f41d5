# The package's public API with real signatures, for editors and type checkers (PEP 561: py.typed).
# One entry per binding; tests/python/test_package.py checks every entry against the module.
from os import PathLike
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str

PathArg = Union[str, PathLike[str]]
# Image files, folders (walked recursively) or '@list.txt', one or a list.
Inputs = Union[PathArg, Sequence[PathArg]]
# float32, C-contiguous, shared in place: a numpy array, a torch tensor (DLPack), a memoryview.
Pixels = Any
# 'all' | 'last' | 'i,j' | [i, j] (negative counts from the end) | None.
Layers = Union[str, Sequence[int], None]
Features = Dict[str, npt.NDArray[np.float32]]
# progress(done, total) after each batch, or True for a tqdm bar (nothing where tqdm is not installed).
Progress = Union[bool, Callable[[int, int], Any], None]
Shard = Union[str, Tuple[int, int], None]

class Error(Exception): ...
class CheckpointError(Error): ...
class ConfigError(CheckpointError): ...
class ImageError(Error): ...
class IoError(Error, OSError): ...
class UsageError(Error, ValueError): ...

class Model:
    threads: int
    def __init__(self, model: PathArg, *, key: Optional[str] = None, attention: Optional[str] = None,
                 pos_interp: Optional[str] = None, precision: Optional[str] = 'fp32',
                 act_quant: Optional[str] = 'per-token', scales: Optional[str] = None,
                 int8_weights: Optional[int] = 8, evict: Optional[str] = None, ttr: Optional[int] = None,
                 register_neurons: Optional[str] = None, max_header_bytes: Optional[int] = 104857600,
                 max_json_depth: Optional[int] = 64, threads: Optional[int] = 0,
                 max_image_pixels: Optional[int] = 178956970, max_memory: Optional[str] = None, max_tokens: Optional[int] = None) -> None: ...
    @classmethod
    def from_pretrained(cls, name_or_path: PathArg, **options: Any) -> Model: ...
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def path(self) -> str: ...
    def tokens(self, height: int, width: int) -> int: ...
    def flops(self, height: int, width: int) -> float: ...
    def preprocess(self, image: Union[PathArg, Pixels], resize: str = 'eval', pipeline: Optional[str] = None,
                   resample: str = 'pil', decode: str = 'exact', exif_transpose: bool = False) -> npt.NDArray[np.float32]: ...
    def forward(self, x: Pixels, threads: Optional[int] = None) -> Features: ...
    def __call__(self, x: Pixels, *, threads: Optional[int] = None) -> Features: ...
    def trace(self, x: Pixels, attention_layers: Layers = None, queries: Union[str, List[str]] = ['cls'],
              norms: bool = False, abstention: bool = False, key_mass: bool = False, mlp_layers: Layers = None,
              blocks: Layers = None, blocks_normed: bool = False, qkv_layers: Layers = None,
              threads: Optional[int] = None) -> Dict[str, Any]: ...
    def get_intermediate_layers(self, x: Pixels, n: Union[int, Sequence[int]] = 1, reshape: bool = False,
                                return_class_token: bool = False, norm: bool = True) -> Tuple[Any, ...]: ...
    def dense(self, image: Union[PathArg, Pixels],
              **kwargs: Any) -> Union[npt.NDArray[Any], Tuple[npt.NDArray[Any], Dict[str, npt.NDArray[np.float32]]]]: ...

class ExplorePage:
    @property
    def html(self) -> str: ...
    @property
    def size(self) -> int: ...
    def save(self, path: PathArg) -> None: ...
    def _repr_html_(self) -> str: ...

Models = Union[Model, str, Sequence[Union[Model, str]]]

def extract(model: Model, inputs: Inputs, out: PathArg, *, patch_tokens: bool = False, project: bool = False,
            resize: str = 'eval', pipeline: Optional[str] = None, resample: str = 'pil', decode: str = 'exact',
            exif_transpose: bool = False, format: str = 'npy', batch: int = 8, chunk: int = 256,
            resume: bool = False, overwrite: bool = False, threads: Optional[int] = None,
            shard: Shard = None, shard_count: int = 0, progress: Progress = None) -> Dict[str, Any]: ...
def dense(model: Model, inputs: Inputs, out: PathArg, *, layers: str = 'last', norm: bool = False,
          concat: bool = False, upsample: str = 'none', window: int = 0, stride: int = 0,
          scales: Optional[Sequence[float]] = None, flip: bool = False, grid: Optional[Tuple[int, int]] = None,
          jbu_sigma_spatial: float = 1.0, jbu_sigma_range: float = 0.15, jbu_radius: int = 2, dtype: str = 'f32',
          pca_dims: int = 0, pca: Union[bool, str] = False, pca_joint: bool = False,
          pca_mask: Union[PathArg, npt.ArrayLike, None] = None, mad_k: float = 10.0,
          artifact_rule: Optional[str] = None, defects: Optional[PathArg] = None, defect_samples: int = 16384,
          defect_seed: int = 0, resize: str = 'eval', pipeline: Optional[str] = None, resample: str = 'pil', decode: str = 'exact',
          exif_transpose: bool = False, format: str = 'npy', batch: int = 1, chunk: int = 256,
          resume: bool = False, overwrite: bool = False, threads: Optional[int] = None,
          shard: Shard = None, shard_count: int = 0, progress: Progress = None) -> Dict[str, Any]: ...
def merge(out: PathArg) -> Dict[str, Any]: ...
def study(configs: Union[str, Sequence[str]], images: Inputs, *, resize: str = 'eval', pipeline: Optional[str] = None,
          resample: str = 'pil', decode: str = 'exact', exif_transpose: bool = False, sizes: Sequence[int] = [],
          labels: Optional[PathArg] = None, mad_k: float = 10.0, artifact_rule: str = 'norm',
          defects: Optional[PathArg] = None, defect_samples: int = 16384, defect_seed: int = 0, sink_alpha: float = 0.3, timing_images: int = 8,
          threads: int = 0) -> Dict[str, Any]: ...
def compare(models: Models, images: Inputs, *, norm_threshold: float = 150.0, mad_k: float = 10.0,
            artifact_rule: str = 'norm', defects: Optional[PathArg] = None, defect_samples: int = 16384,
            defect_seed: int = 0,
            resize: str = 'eval', pipeline: Optional[str] = None, resample: str = 'pil', decode: str = 'exact',
            exif_transpose: bool = False, threads: int = 0) -> Dict[str, Any]: ...
def explore(models: Models, images: Inputs, *, queries: str = 'auto', rollout: bool = True, max_page_mb: float = 48.0,
            title: str = 'vitreg explore', mad_k: float = 10.0, artifact_rule: str = 'norm',
            defects: Optional[PathArg] = None, defect_samples: int = 16384, defect_seed: int = 0, resize: str = 'eval', pipeline: Optional[str] = None, resample: str = 'pil',
            decode: str = 'exact', exif_transpose: bool = False, threads: int = 0) -> ExplorePage: ...
def read_image(path: PathArg, max_pixels: int = 178956970, exif_transpose: bool = False) -> npt.NDArray[np.uint8]: ...
def model_options() -> List[Dict[str, Any]]: ...
def shipped_models() -> List[str]: ...
def list_models() -> List[str]: ...
def defects(model: Union[Model, str], *, samples: int = 16384, seed: int = 0, top: int = 8,
            out: Optional[PathArg] = None) -> Dict[str, Any]: ...
def maps(model: Union[Model, str], image: PathArg, *, out: Optional[PathArg] = None, layers: str = 'all',
         heads: str = 'all', query: str = 'cls', rollout: bool = False, discard: float = 0.0, resize: str = 'eval',
         pipeline: Optional[str] = None, resample: str = 'pil', decode: str = 'exact', exif_transpose: bool = False,
         save_attention: bool = False, save_norms: bool = False, norm_threshold: float = 150.0, mad_k: float = 10.0,
         artifact_rule: str = 'norm', defects: Optional[PathArg] = None, defect_samples: int = 16384,
         defect_seed: int = 0, threads: int = 0) -> Dict[str, Any]: ...
def eval_correspondence(models: Models, pairs: Sequence[Tuple[PathArg, PathArg, PathArg]], *,
                        alphas: Sequence[float] = [0.05, 0.1, 0.15], resize: str = 'long:448',
                        pipeline: Optional[str] = None, resample: str = 'pil', decode: str = 'exact',
                        exif_transpose: bool = False, threads: int = 0) -> Dict[str, Any]: ...
def eval_segmentation(models: Models, images: PathArg, masks: PathArg, *, train_fraction: float = 0.5, k: int = 30,
                      temperature: float = 0.02, memory_per_image: int = 100, max_memory: int = 1048576,
                      seed: int = 0, ridge: float = 1.0, resize: str = 'long:448', pipeline: Optional[str] = None,
                      resample: str = 'pil', decode: str = 'exact', exif_transpose: bool = False,
                      threads: int = 0) -> Dict[str, Any]: ...
def eval_knn(models: Models, images: PathArg, *, feature: str = 'cls', k: int = 20, temperature: float = 0.07,
             resize: str = 'eval', pipeline: Optional[str] = None, resample: str = 'pil', decode: str = 'exact',
             exif_transpose: bool = False, threads: int = 0) -> Dict[str, Any]: ...
