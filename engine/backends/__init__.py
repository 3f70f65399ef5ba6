"""Backends: the thin device layer under the executor (``cpu``: numpy; ``cuda``: cuda-python).

A backend offers one arena of device memory, host buffers, three in-order
streams with events, and three asynchronous calls issued on a stream: run a
node, copy host to device, copy device to host. ``interface.Backend`` lists every member."""
