"""Backends: the thin device layer under the executor (``cpu``: numpy; ``cuda``: cuda.bindings.driver).

A device offers one arena of device memory, host buffers, three in-order streams with events,
and asynchronous calls issued on a stream: run a node, copy host to device, copy device to host,
fill, delay. ``interface.Device`` lists every primitive; ``instrument.Instrumented`` adds timing
and the sanitizer to any device, which makes an ``interface.Backend``."""
