// vitreg's exceptions in Python: one hierarchy under vitreg.Error, carrying vitreg's message.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "vitreg/error.hpp"

namespace vitreg::python {

namespace {

// The classes live as long as the interpreter; held here for the translator.
struct ErrorClasses {
    py::handle error, checkpoint, config, image, io, usage;
};
ErrorClasses classes;

py::handle make_class(py::module_& m, const char* name, py::tuple bases, const char* doc) {
    py::dict attrs;
    attrs["__doc__"] = doc;
    attrs["__module__"] = "vitreg";
    py::object cls = py::module_::import("builtins").attr("type")(name, bases, attrs);
    m.attr(name) = cls;
    return cls.release();
}

}  // namespace

void bind_errors(py::module_& m) {
    classes.error = make_class(m, "Error", py::make_tuple(py::handle(PyExc_Exception)),
                               "Base of every error vitreg raises; str(e) names the file or input and the fault.");
    classes.checkpoint = make_class(m, "CheckpointError", py::make_tuple(classes.error),
                                    "A checkpoint that cannot be found or read, is malformed, or lacks a tensor.");
    classes.config = make_class(m, "ConfigError", py::make_tuple(classes.checkpoint),
                                "A checkpoint whose configuration contradicts itself or its tensors.");
    classes.image = make_class(m, "ImageError", py::make_tuple(classes.error),
                               "An image that cannot be decoded or preprocessed; batch jobs record such an "
                               "input as a failed row and go on.");
    classes.io = make_class(m, "IoError", py::make_tuple(classes.error, py::handle(PyExc_OSError)),
                            "A file that cannot be written, or an output folder in the wrong state.");
    classes.usage = make_class(m, "UsageError", py::make_tuple(classes.error, py::handle(PyExc_ValueError)),
                               "Arguments that make no sense (a bad array, option or combination); also a "
                               "ValueError.");
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ConfigError& e) {
            PyErr_SetString(classes.config.ptr(), e.what());
        } catch (const CheckpointError& e) {
            PyErr_SetString(classes.checkpoint.ptr(), e.what());
        } catch (const ImageError& e) {
            PyErr_SetString(classes.image.ptr(), e.what());
        } catch (const IoError& e) {
            PyErr_SetString(classes.io.ptr(), e.what());
        } catch (const UsageError& e) {
            PyErr_SetString(classes.usage.ptr(), e.what());
        } catch (const Error& e) {
            PyErr_SetString(classes.error.ptr(), e.what());
        }
    });
}

}  // namespace vitreg::python
