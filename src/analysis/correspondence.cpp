#include "vitreg/analysis/correspondence.hpp"

#include <zlib.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <cctype>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/parse_number.hpp"
#include "io/zip_reader.hpp"
#include "vitreg/error.hpp"
#include "vitreg/image.hpp"

namespace vitreg {

namespace {

std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw UsageError(path + ": cannot read the geometry file");
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && std::equal(tail.rbegin(), tail.rend(), s.rbegin(),
                                                 [](char a, char b) { return std::tolower(a) == std::tolower(b); });
}

// Every number of `text`, in order; false when something else is there.
bool numbers_of(const std::string& text, std::vector<double>& out) {
    std::istringstream in(text);
    std::string word;
    while (in >> word) {
        char* end = nullptr;
        const double v = std::strtod(word.c_str(), &end);
        if (end != word.c_str() + word.size()) return false;
        out.push_back(v);
    }
    return true;
}

std::array<double, 9> homography_of(const std::vector<double>& v, const std::string& path) {
    if (v.size() != 9)
        throw UsageError(path + ": a homography must be 3x3 (9 numbers), found " + std::to_string(v.size()));
    std::array<double, 9> h{};
    Eigen::Matrix3d m;
    for (int i = 0; i < 9; ++i) {
        if (!std::isfinite(v[i])) throw UsageError(path + ": the homography holds a value that is not finite");
        h[i] = v[i];
        m(i / 3, i % 3) = v[i];
    }
    // |det| against |m|^3 is scale-free: measured on m over its largest entry, so that huge entries
    // cannot overflow it, and the zero matrix is singular too.
    const double largest = m.cwiseAbs().maxCoeff();
    const Eigen::Matrix3d unit = largest > 0 ? Eigen::Matrix3d(m / largest) : m;
    if (largest == 0 || std::abs(unit.determinant()) < 1e-12 * std::pow(unit.norm(), 3))
        throw UsageError(path + ": the homography is singular");
    return h;
}

// The text of the first <tag>...</tag> that holds no other element. Searched by hand: std::regex
// recurses once per character and overflows the stack on a long element.
std::string element_text(const std::string& text, const std::string& tag, const std::string& path) {
    const std::string open = "<" + tag + ">", close = "</" + tag + ">";
    for (auto at = text.find(open); at != std::string::npos; at = text.find(open, at + 1)) {
        const auto start = at + open.size(), end = text.find('<', start);
        if (end != std::string::npos && text.compare(end, close.size(), close) == 0) return text.substr(start, end - start);
    }
    throw UsageError(path + ": not an OpenCV matrix (no <" + tag + ">)");
}

// OpenCV's FileStorage XML: the first element with rows, cols and data.
std::array<double, 9> read_opencv_xml(const std::string& path) {
    const std::string text = read_bytes(path);
    const std::string rows_text = element_text(text, "rows", path), cols_text = element_text(text, "cols", path);
    std::vector<double> rows, cols, data;
    if (!numbers_of(rows_text, rows) || !numbers_of(cols_text, cols) || rows.size() != 1 || cols.size() != 1)
        throw UsageError(path + ": unreadable <rows> or <cols>");
    if (rows[0] != 3 || cols[0] != 3) {
        std::ostringstream size;  // streamed, not cast: the numbers need not fit an int
        size << rows[0] << "x" << cols[0];
        throw UsageError(path + ": a homography must be 3x3, this matrix is " + size.str());
    }
    if (!numbers_of(element_text(text, "data", path), data)) throw UsageError(path + ": unreadable <data>");
    return homography_of(data, path);
}

// An .npz entry's bytes: stored or deflated.
std::string npz_entry(const std::string& archive, const std::string& path) {
    try {
        const ZipReader zip(reinterpret_cast<const unsigned char*>(archive.data()), archive.size(), path);
        if (zip.entries().size() != 1) throw UsageError(path + ": expected one array in the .npz, found " + std::to_string(zip.entries().size()));
        const ZipEntry& e = zip.entries().front();
        const unsigned char* data = reinterpret_cast<const unsigned char*>(archive.data()) + e.data_offset;
        if (e.method == 0) return std::string(reinterpret_cast<const char*>(data), e.size);
        if (e.method != 8) throw UsageError(path + ": " + e.name + " is neither stored nor deflated");
        // Deflate shrinks by 1032:1 at most: a larger declared size is a lie, refused before the
        // buffer for it is made.
        if (e.size > std::min<std::uint64_t>(1ull << 31, e.compressed_size * 1032 + 1024))
            throw UsageError(path + ": " + e.name + " declares " + std::to_string(e.size) + " bytes, more than its " +
                             std::to_string(e.compressed_size) + " deflated bytes can hold");
        std::string out(e.size, '\0');
        z_stream z{};
        if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw UsageError(path + ": cannot inflate");
        z.next_in = const_cast<unsigned char*>(data);
        z.avail_in = static_cast<uInt>(e.compressed_size);
        z.next_out = reinterpret_cast<unsigned char*>(out.data());
        z.avail_out = static_cast<uInt>(out.size());
        const int rc = inflate(&z, Z_FINISH);
        inflateEnd(&z);
        if (rc != Z_STREAM_END || z.total_out != e.size) throw UsageError(path + ": " + e.name + " does not inflate to its size");
        return out;
    } catch (const CheckpointError& e) {
        throw UsageError(std::string(e.what()));
    }
}

// A 2-D little-endian float32/float64 .npy array (C order) as float.
std::vector<float> npy_matrix(const std::string& bytes, const std::string& path, int& height, int& width) {
    if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw UsageError(path + ": not a .npy array");
    const std::size_t header_len = bytes[6] == 1 ? (static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8) : 0;
    if (bytes[6] != 1 || 10 + header_len > bytes.size()) throw UsageError(path + ": unsupported .npy header");
    // The header is read by plain search: std::regex recurses once per character matched and
    // overflows the stack on a 64 KB header.
    const std::string header = bytes.substr(10, header_len);
    const bool f4 = header.find("'descr': '<f4'") != std::string::npos, f8 = header.find("'descr': '<f8'") != std::string::npos;
    if (header.find("'fortran_order': False") == std::string::npos || f4 == f8)
        throw UsageError(path + ": the disparity must be a C-order little-endian float array");
    const std::size_t item = f4 ? 4 : 8;
    const std::string shape_key = "'shape': (";
    const auto shape_at = header.find(shape_key), shape_end = header.find(')', shape_at);
    const auto dims = shape_at == std::string::npos || shape_end == std::string::npos
                          ? std::vector<std::string>{}
                          : split(header.substr(shape_at + shape_key.size(), shape_end - shape_at - shape_key.size()), ',');
    if (dims.size() != 2 || dims[1].empty() || dims[1][0] != ' ')
        throw UsageError(path + ": the disparity must be a 2-D array");
    const auto rows = parse_integer(dims[0], 1, std::numeric_limits<int>::max());
    const auto cols = parse_integer(dims[1].substr(1), 1, std::numeric_limits<int>::max());
    const std::size_t payload = bytes.size() - 10 - header_len;
    // Divided, not multiplied: a shape near 2^31 x 2^31 must not wrap around to the payload's size.
    if (!rows || !cols || payload % item != 0 || payload / item / static_cast<std::size_t>(*rows) != static_cast<std::size_t>(*cols) ||
        payload / item % static_cast<std::size_t>(*rows) != 0)
        throw UsageError(path + ": the array's size does not match its shape");
    height = static_cast<int>(*rows);
    width = static_cast<int>(*cols);
    const std::size_t n = payload / item;
    std::vector<float> out(n);
    const char* data = bytes.data() + 10 + header_len;
    for (std::size_t i = 0; i < n; ++i) {
        if (item == 4) {
            std::memcpy(&out[i], data + 4 * i, 4);
        } else {
            double d;
            std::memcpy(&d, data + 8 * i, 8);
            out[i] = static_cast<float>(d);
        }
    }
    return out;
}

}  // namespace

bool PairGeometry::map(double x, double y, double& x2, double& y2) const {
    if (kind == Kind::Homography) {
        const auto& h = homography;
        const double w = h[6] * x + h[7] * y + h[8];
        if (std::abs(w) < 1e-12) return false;
        x2 = (h[0] * x + h[1] * y + h[2]) / w;
        y2 = (h[3] * x + h[4] * y + h[5]) / w;
        return true;
    }
    const long xi = std::lround(x), yi = std::lround(y);
    if (xi < 0 || yi < 0 || xi >= width || yi >= height) return false;
    const float d = disparity[static_cast<std::size_t>(yi) * width + xi];
    if (!std::isfinite(d) || d <= 0) return false;
    x2 = x - d;
    y2 = y;
    return true;
}

PairGeometry read_pair_geometry(const std::string& path) {
    PairGeometry g;
    g.source = path;
    if (ends_with(path, ".xml")) {
        g.homography = read_opencv_xml(path);
    } else if (ends_with(path, ".npz")) {
        g.kind = PairGeometry::Kind::Disparity;
        g.disparity = npy_matrix(npz_entry(read_bytes(path), path), path, g.height, g.width);
    } else if (ends_with(path, ".png")) {
        g.kind = PairGeometry::Kind::Disparity;
        const Image im = decode_image(path);
        if (im.mode != "L") throw UsageError(path + ": a disparity PNG must be greyscale (mode L), it is " + im.mode);
        g.width = im.width;
        g.height = im.height;
        g.disparity.resize(static_cast<std::size_t>(im.width) * im.height);
        for (std::size_t p = 0; p < g.disparity.size(); ++p) g.disparity[p] = im.rgb[3 * p];
    } else {
        std::vector<double> v;
        if (!numbers_of(read_bytes(path), v)) throw UsageError(path + ": a homography text holds 9 numbers and nothing else");
        g.homography = homography_of(v, path);
    }
    return g;
}

std::vector<std::pair<int, int>> mutual_nearest_neighbours(const std::vector<float>& a, const std::vector<float>& b, int dim) {
    using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::Index na = static_cast<Eigen::Index>(a.size() / dim), nb = static_cast<Eigen::Index>(b.size() / dim);
    Matrix fa = Eigen::Map<const Matrix>(a.data(), na, dim), fb = Eigen::Map<const Matrix>(b.data(), nb, dim);
    fa.rowwise().normalize();
    fb.rowwise().normalize();
    const Matrix sim = fa * fb.transpose();
    std::vector<Eigen::Index> best_b(na), best_a(nb);
    for (Eigen::Index i = 0; i < na; ++i) sim.row(i).maxCoeff(&best_b[i]);
    for (Eigen::Index j = 0; j < nb; ++j) sim.col(j).maxCoeff(&best_a[j]);
    std::vector<std::pair<int, int>> out;
    for (Eigen::Index i = 0; i < na; ++i)
        if (best_a[best_b[i]] == i) out.emplace_back(static_cast<int>(i), static_cast<int>(best_b[i]));
    return out;
}

std::pair<double, double> patch_centre(const Geometry& g, int patch, int grid_w, int p) {
    const double xi = (p % grid_w + 0.5) * patch + g.crop_left, yi = (p / grid_w + 0.5) * patch + g.crop_top;
    // Continuous coordinates (pixel edges at integers) scaled to the source, then pixel centres at integers.
    return {xi * g.source_width / g.resized_width - 0.5, yi * g.source_height / g.resized_height - 0.5};
}

CorrespondenceScore score_correspondence(const Features& a, const Geometry& ga, const Features& b, const Geometry& gb,
                                         int patch, const PairGeometry& truth, const std::vector<double>& alphas) {
    if (truth.kind == PairGeometry::Kind::Disparity && (truth.width != ga.source_width || truth.height != ga.source_height))
        throw UsageError(truth.source + ": the disparity map is " + std::to_string(truth.width) + "x" + std::to_string(truth.height) +
                         ", its first image " + std::to_string(ga.source_width) + "x" + std::to_string(ga.source_height));
    CorrespondenceScore s;
    s.alphas = alphas;
    s.threshold_side = std::max(gb.source_width, gb.source_height);
    const std::vector<float> fa(a.patches_of(0), a.patches_of(0) + static_cast<std::size_t>(a.patch_count()) * a.dim);
    const std::vector<float> fb(b.patches_of(0), b.patches_of(0) + static_cast<std::size_t>(b.patch_count()) * b.dim);
    std::vector<int> correct(alphas.size(), 0);
    for (const auto& [i, j] : mutual_nearest_neighbours(fa, fb, a.dim)) {
        CorrespondenceMatch m;
        std::tie(m.x1, m.y1) = patch_centre(ga, patch, a.grid_w, i);
        std::tie(m.x2, m.y2) = patch_centre(gb, patch, b.grid_w, j);
        double nrm_a = 0, nrm_b = 0;
        for (int d = 0; d < a.dim; ++d) {
            m.cosine += static_cast<double>(fa[static_cast<std::size_t>(i) * a.dim + d]) * fb[static_cast<std::size_t>(j) * a.dim + d];
            nrm_a += static_cast<double>(fa[static_cast<std::size_t>(i) * a.dim + d]) * fa[static_cast<std::size_t>(i) * a.dim + d];
            nrm_b += static_cast<double>(fb[static_cast<std::size_t>(j) * a.dim + d]) * fb[static_cast<std::size_t>(j) * a.dim + d];
        }
        m.cosine /= std::sqrt(nrm_a * nrm_b) + 1e-30;
        double tx = 0, ty = 0;
        if (truth.map(m.x1, m.y1, tx, ty) && tx >= -0.5 && ty >= -0.5 && tx < gb.source_width - 0.5 && ty < gb.source_height - 0.5) {
            m.error = std::hypot(m.x2 - tx, m.y2 - ty);
            ++s.scored;
            for (std::size_t k = 0; k < alphas.size(); ++k) correct[k] += m.error <= alphas[k] * s.threshold_side;
        }
        s.list.push_back(m);
    }
    s.matches = static_cast<int>(s.list.size());
    for (int c : correct) s.pck.push_back(s.scored ? static_cast<double>(c) / s.scored : 0.0);
    return s;
}

}  // namespace vitreg
