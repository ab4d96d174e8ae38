answer({"hostname": attempt("hostname", write_open("/proc/sys/kernel/hostname")),
        "drop_caches": attempt("drop_caches", write_open("/proc/sys/vm/drop_caches")),
        "sysrq": attempt("sysrq", write_open("/proc/sysrq-trigger"))})
