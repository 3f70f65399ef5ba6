"""The operator library. Importing this package registers every operator."""
from . import registry  # noqa: F401
from . import conv, dense, elementwise, loss, norm, optim, pooling, shape  # noqa: F401
from . import activation, attention, embedding, layer_norm  # noqa: F401  (transformers)
from . import broadcast  # noqa: F401
from . import math as _math  # noqa: F401  (imported PyTorch graphs: unary, scalar, cast, slice)
from . import indexing  # noqa: F401  (imported PyTorch graphs: gather, index_select)
from . import logic  # noqa: F401  (imported PyTorch graphs: comparisons, logical operators)
from . import resample  # noqa: F401  (Pix2PixHD and DeepLabv3+: bilinear upsampling, reflection padding)
from .registry import REGISTRY, Cost, Op, OpError, ShapeError, UnknownOpError, get  # noqa: F401
