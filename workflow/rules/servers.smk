# Local runs share one model server per model between all their cells (ctxpolicy.serving.shared):
# onstart announces the session to every job (CTXPOLICY_SHARED_SERVERS, inherited by the local
# jobs' shells), the first cell that needs a model starts its server, the others reuse it, and
# onsuccess/onerror stop them. A server also stops by itself within a second of Snakemake being
# gone (kill -9 included). Cluster runs (a non-local executor, or a job inside one) are left
# alone: each cell job starts and stops its own server. CTXPOLICY_SHARED_SERVERS=off opts out.
# The helpers are in resources.smk ("shared model servers").


onstart:
    if shares_servers():
        os.environ[shared_servers.ENV] = SHARED_SESSION.announce()


onsuccess:
    stop_shared_servers()


onerror:
    stop_shared_servers()
