"""The operator library. Importing this package registers every operator."""
from . import registry  # noqa: F401
from . import dense, elementwise, loss, norm, optim, shape  # noqa: F401
from .registry import REGISTRY, Cost, Op, OpError, ShapeError, UnknownOpError, get  # noqa: F401

try:   # the convolution and pooling families are being added alongside
    from . import conv, pool  # noqa: F401
except ImportError:
    pass
