#pragma once
// What the loopback servers' routes share (the explorer's and the search page's): an error
// answer with its status, JSON replies, and checked request parameters.
#include <httplib.h>

#include <atomic>
#include <string>

#include <nlohmann/json.hpp>

#include "vitreg/error.hpp"

namespace vitreg::cli {

// An answer the client caused or may retry: its status and message.
struct HttpError : Error {
    int status;
    HttpError(int s, const std::string& message) : Error(message), status(s) {}
};

void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200);
// The parameter's value; 400 when it is missing.
std::string param(const httplib::Request& req, const char* key);
// A whole-number parameter in lo..hi; 400 naming it otherwise.
int int_param(const httplib::Request& req, const char* key, long lo, long hi);

// Holds one of the --max-forwards slots, or refuses at once (429) when none is free.
class ForwardSlot {
public:
    ForwardSlot(std::atomic<int>& count, int limit) : count_(count) {
        if (count_.fetch_add(1) >= limit) {
            count_.fetch_sub(1);
            throw HttpError(429, "busy: " + std::to_string(limit) + " image" + (limit == 1 ? " is" : "s are") +
                                     " being run already (--max-forwards); retry in a moment");
        }
    }
    ~ForwardSlot() { count_.fetch_sub(1); }
    ForwardSlot(const ForwardSlot&) = delete;
    ForwardSlot& operator=(const ForwardSlot&) = delete;

private:
    std::atomic<int>& count_;
};

}  // namespace vitreg::cli
