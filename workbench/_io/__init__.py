"""Files: atomic writes, content hashes, the cache folder.

Nothing the user made is lost: every file the workbench writes goes to a
temporary name in the same folder first and is renamed into place, so an
interrupted run never leaves a half-written file that a later run trusts.
"""

from __future__ import annotations

from .atomic import (
                     atomic_path,
                     atomic_write_bytes,
                     atomic_write_json,
                     atomic_write_text,
                     check_output_path,
                     read_json,
                     to_json,
)
from .hashing import sha256_bytes, sha256_file, stable_hash
from .locks import LOCK_FILE, entry_lock, folder_lock
from .paths import CACHE_ENV, CACHE_TOKEN, cache_dir, local_paths, portable_paths
from .sealed import SEAL_FILE, check_folder_seal, damaged_cache_entry, read_sealed_json, seal_folder, write_sealed_json
from .temporaries import TEMP_MARKER, is_own_temporary, make_own_temporary, remove_own_temporaries

__all__ = ["CACHE_ENV", "CACHE_TOKEN", "LOCK_FILE", "SEAL_FILE", "TEMP_MARKER", "atomic_path", "atomic_write_bytes",
           "atomic_write_json", "atomic_write_text", "cache_dir", "check_folder_seal", "check_output_path",
           "damaged_cache_entry", "entry_lock", "folder_lock", "is_own_temporary", "local_paths", "make_own_temporary",
           "portable_paths", "read_json", "read_sealed_json", "remove_own_temporaries", "seal_folder", "sha256_bytes",
           "sha256_file", "stable_hash", "to_json", "write_sealed_json"]
