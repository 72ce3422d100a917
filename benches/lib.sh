# Shell helpers the benchmark scripts share (sourced by benches/s3_latency,
# benches/streaming_day and benches/big_table): building `eqdv` from a checkout and from
# a baseline revision, and Toxiproxy.
# Expects: root (this checkout), profile, work (where binaries go: $work/bin), and
# CARGO_TARGET_DIR; die and step defined by the caller.

# The target subdirectory of a cargo profile.
profile_dir() {
    case "$profile" in dev) echo debug ;; *) echo "$profile" ;; esac
}

# build DIR NAME [PACKAGE BIN]: builds BIN (default eqdv) in DIR and copies it to
# $work/bin/BIN-NAME at once (the target dir may be shared, and another checkout's build
# would replace the binary).
build() {
    local dir="$1" name="$2" package="${3:-eqdv-cli}" bin="${4:-eqdv}" t0
    step "building $bin ($name, profile $profile) in $dir"
    t0=$(date +%s)
    # Cargo hashes a workspace's own crates by their path relative to the workspace, so
    # two checkouts sharing a target dir share those artifacts, and a file older than the
    # other checkout's build counts as built: the checkout built now must look newest.
    find "$dir" -name target -prune -o \( -name '*.rs' -o -name Cargo.toml \) -print0 | xargs -0 touch
    # engine_opt_level (optional, set by the caller): the engine crate's opt-level in
    # this profile, for both checkouts alike (a dev build's is 0).
    local config=()
    [ -z "${engine_opt_level:-}" ] || config=(--config "profile.$profile.package.eqdv-engine.opt-level=$engine_opt_level")
    (cd "$dir" && nice -n 19 cargo build --quiet --profile "$profile" "${config[@]}" -p "$package" --bin "$bin") ||
        die "cargo build in $dir failed"
    mkdir -p "$work/bin"
    cp "$CARGO_TARGET_DIR/$(profile_dir)/$bin" "$work/bin/$bin-$name"
    echo "    built in $(($(date +%s) - t0))s" >&2
}

# baseline_tree REV: a detached worktree of REV under $work/baseline (made or moved there).
baseline_tree() {
    local rev="$1" tree="$work/baseline"
    if [ ! -e "$tree/.git" ]; then
        git -C "$root" worktree add --detach "$tree" "$rev" >/dev/null
    else
        git -C "$tree" checkout --quiet --detach "$rev"
    fi
    echo "$tree"
}

# toxiproxy_server: prints the path of toxiproxy-server v2.5.0, built once into
# $EQDV_CACHE/bin with go install (about 40 s).
toxiproxy_server() {
    local bin="$EQDV_CACHE/bin/toxiproxy-server-v2.5.0" build_dir
    if [ ! -x "$bin" ]; then
        command -v go >/dev/null 2>&1 || die "go is not on PATH: install Go to build Toxiproxy"
        step "building Toxiproxy v2.5.0 with go install (first run only)"
        mkdir -p "$EQDV_CACHE/bin"
        build_dir="$(mktemp -d "$EQDV_CACHE/bin/.toxiproxy-build.XXXXXX")"
        (cd "$build_dir" && GOBIN="$build_dir" nice -n 19 go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0) >&2 ||
            die "go install of Toxiproxy failed"
        mv "$build_dir/server" "$bin"
        rm -rf "$build_dir"
    fi
    echo "$bin"
}
