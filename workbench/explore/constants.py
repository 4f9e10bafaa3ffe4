"""The explorer's fixed settings (read by its results and its rendering)."""

HEATMAP_VMAX = 10.0     # percent: one colour scale for every redraw (rates above it take the darkest red)
SPLIT = "test"
