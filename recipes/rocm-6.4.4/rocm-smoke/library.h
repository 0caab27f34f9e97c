// A library of the stack opened at run time. rocm-smoke checks whichever libraries are installed
// beside it: it is built against rocRAND and HIP alone, so a user with only part of the stack
// still gets every check that applies, and one that is absent is said to be absent, not failed.
#pragma once

#include <dlfcn.h>

#include <string>

class Library {
public:
    explicit Library(const char* soname) : soname_(soname) {
        handle_ = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (handle_ == nullptr) {
            const char* why = dlerror();
            error_ = why != nullptr ? why : "not found";
        }
    }
    ~Library() {
        // Left loaded: a library's own threads or atexit handlers may still refer to it.
    }
    Library(const Library&) = delete;
    Library& operator=(const Library&) = delete;

    bool loaded() const { return handle_ != nullptr; }
    // Not installed at all, rather than installed and unloadable (a dependency of its own
    // missing, a broken file): the loader names the library itself as the file it lacks.
    bool absent() const {
        return handle_ == nullptr && error_.rfind(std::string(soname_) + ":", 0) == 0 &&
               error_.find("No such file") != std::string::npos;
    }
    const char* soname() const { return soname_; }
    const std::string& error() const { return error_; }

    // The symbol as a function pointer of type F; null (and the reason kept) when missing.
    template <typename F>
    F get(const char* name) {
        if (handle_ == nullptr) return nullptr;
        void* p = dlsym(handle_, name);
        if (p == nullptr) {
            missing_ += missing_.empty() ? name : std::string(", ") + name;
        }
        return reinterpret_cast<F>(p);
    }

    // The symbols `get` could not find, comma-separated (empty when all were found).
    const std::string& missing() const { return missing_; }

private:
    const char* soname_;
    void* handle_ = nullptr;
    std::string error_;
    std::string missing_;
};
