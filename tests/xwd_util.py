"""Reading X window dumps (xwd -root) for the viewer test: 24- or 32-bit TrueColor only."""
import struct


def read_xwd(path):
    """→ (width, height, rows of (r, g, b) tuples)."""
    with open(path, "rb") as f:
        data = f.read()
    fields = struct.unpack(">25I", data[:100])
    header_size, width, height = fields[0], fields[4], fields[5]
    byte_order, bits_per_pixel, bytes_per_line, ncolors = fields[7], fields[11], fields[12], fields[19]
    assert bits_per_pixel in (24, 32), bits_per_pixel
    n = bits_per_pixel // 8
    start = header_size + 12 * ncolors
    rows = []
    for y in range(height):
        line = data[start + y * bytes_per_line:start + y * bytes_per_line + n * width]
        if byte_order == 0:  # LSBFirst: B G R (X)
            rows.append([(line[n * x + 2], line[n * x + 1], line[n * x]) for x in range(width)])
        else:  # MSBFirst: (X) R G B
            rows.append([(line[n * x + n - 3], line[n * x + n - 2], line[n * x + n - 1]) for x in range(width)])
    return width, height, rows
