#pragma once
// The library's public API in one include (vitreg::core and vitreg::batch): models, their
// configuration and checkpoints, probes and interventions, images and preprocessing, the
// writers and the batch jobs. Analysis and rendering have their own folders beside this one
// (vitreg/analysis/, vitreg/render/) and libraries (vitreg::analysis, vitreg::render).
#include "vitreg/batch_job.hpp"
#include "vitreg/canonical_checkpoint.hpp"
#include "vitreg/checkpoint.hpp"
#include "vitreg/config.hpp"
#include "vitreg/dense.hpp"
#include "vitreg/error.hpp"
#include "vitreg/extract.hpp"
#include "vitreg/features.hpp"
#include "vitreg/image.hpp"
#include "vitreg/inputs.hpp"
#include "vitreg/intervention.hpp"
#include "vitreg/merge.hpp"
#include "vitreg/model.hpp"
#include "vitreg/precision.hpp"
#include "vitreg/preprocess.hpp"
#include "vitreg/probe.hpp"
#include "vitreg/resize_filter.hpp"
#include "vitreg/tensor_file.hpp"
#include "vitreg/version.hpp"
#include "vitreg/writers.hpp"
