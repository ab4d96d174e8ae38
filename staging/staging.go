// Package staging is the trusted host phase: it clones or imports each
// configured repository, scrubs it, makes it read-only, verifies it, and
// records its commit. It also provides the safe descriptor-relative copier.
//
// Staging is the only phase that holds a credential. git runs with a
// complete, minimal environment; the token reaches it only through a
// GIT_ASKPASS helper reading a 0600 file in the private root, and the token
// file, the helper and the isolated HOME are removed before Stage returns.
// See docs/staging.md.
package staging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// SeedsDirName is the directory of the private root that holds the seeds.
const SeedsDirName = "seeds"

// Repo is one configured private repository. Only the operator chooses these.
type Repo struct {
	Slug        string // owner/name
	Sensitivity string // public, internal, confidential, sealed
	Source      string // "" (GitHub), an https URL, or a local path
	Ref         string // "" (default branch), a branch, tag or commit
}

// Options control Stage.
type Options struct {
	PrivateRoot string    // 0700 directory owned by root; seeds go in PrivateRoot/seeds
	RunID       string    // 32 hex
	Token       string    // staging credential ("" = none)
	ServerURL   string    // "" = https://github.com
	Progress    io.Writer // one line per repository; nil = discard

	// GitTimeout bounds each git command; zero means DefaultGitTimeout.
	GitTimeout time.Duration
	// OnEvent, when set, receives the lifecycle of staging (one event per
	// repository, then the removal of the credentials) so the caller can
	// write protected audit records with each resolved commit. It must not
	// block for long.
	OnEvent func(Event)
}

// Seed is one staged, scrubbed, read-only repository.
type Seed struct {
	Repo        string // lower-cased slug
	SeedID      string // HMAC of the slug under the run id, 32 hex
	Dir         string // absolute path of the read-only seed
	Commit      string // resolved commit
	Sensitivity string
}

// Event kinds reported through Options.OnEvent.
const (
	EventSeedStaged         = "seed-staged"         // Repo, SeedID, Commit, Sensitivity, Duration
	EventSeedFailed         = "seed-failed"         // Repo, SeedID, Duration, Err (a *RejectError for a rule)
	EventCredentialsRemoved = "credentials-removed" // token file, askpass helper and HOME are gone
)

// Event is one step of the staging lifecycle.
type Event struct {
	Kind        string
	Repo        string
	SeedID      string
	Commit      string
	Sensitivity string
	Duration    time.Duration
	Err         error
}

// Stage stages every repo and writes the seed map. On failure nothing is left.
//
// The private root must exist, be a real directory owned by the caller and
// closed to group and others; PrivateRoot/seeds and the seed map must not
// exist yet. Each seed is PrivateRoot/seeds/<SeedID>: a depth-1 clone of one
// commit with its object store, index and HEAD, scrubbed and read-only.
func Stage(ctx context.Context, o Options, repos []Repo) (seeds []Seed, err error) {
	plan, err := planStage(o, repos)
	if err != nil {
		return nil, err
	}
	seedsDir := filepath.Join(o.PrivateRoot, SeedsDirName)
	if err := os.Mkdir(seedsDir, 0o700); err != nil {
		return nil, fmt.Errorf("stage: seeds directory: %w", err)
	}
	creds, err := writeCredentials(o.PrivateRoot, o.Token)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("stage: %w", err), removeSeeds(context.WithoutCancel(ctx), seedsDir))
	}
	credsGone := false
	defer func() {
		if !credsGone {
			if rerr := creds.remove(); rerr != nil {
				err = errors.Join(err, fmt.Errorf("stage: remove credentials: %w", rerr))
			} else {
				emit(o, Event{Kind: EventCredentialsRemoved})
			}
		}
		if err != nil {
			seeds = nil
			err = errors.Join(err, removeSeeds(context.WithoutCancel(ctx), seedsDir))
		}
	}()
	g, err := newGitRunner(creds, o.GitTimeout, o.Token)
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	for _, p := range plan {
		start := time.Now()
		seed, err := stageOne(ctx, g, seedsDir, o.RunID, p)
		d := time.Since(start)
		if err != nil {
			emit(o, Event{Kind: EventSeedFailed, Repo: p.slug, SeedID: SeedID(o.RunID, p.slug), Duration: d, Err: err})
			return nil, fmt.Errorf("stage %s: %w", p.slug, err)
		}
		fmt.Fprintf(progress, "staged %s commit %s in %s\n", seed.Repo, seed.Commit, d.Round(time.Millisecond))
		emit(o, Event{Kind: EventSeedStaged, Repo: seed.Repo, SeedID: seed.SeedID, Commit: seed.Commit,
			Sensitivity: seed.Sensitivity, Duration: d})
		seeds = append(seeds, seed)
	}
	if err := creds.remove(); err != nil {
		return nil, fmt.Errorf("stage: remove credentials: %w", err) // the deferred removal retries
	}
	credsGone = true
	emit(o, Event{Kind: EventCredentialsRemoved})
	if err := WriteSeedMap(filepath.Join(o.PrivateRoot, SeedMapName), o.RunID, seeds); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	return seeds, nil
}

func emit(o Options, e Event) {
	if o.OnEvent != nil {
		o.OnEvent(e)
	}
}

// plannedRepo is one validated repository with its resolved source.
type plannedRepo struct {
	slug        string // normalized
	sensitivity string
	source      string
	kind        sourceKind
	ref         string
	credential  bool // the source is on the server host: offer the token
}

// planStage validates the options and every repository before anything is
// created.
func planStage(o Options, repos []Repo) ([]plannedRepo, error) {
	if err := checkRoot(o.PrivateRoot); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	if !validRunID(o.RunID) {
		return nil, errors.New("stage: run id must be 32 lower-case hex digits")
	}
	if o.Token != "" && !validToken(o.Token) {
		return nil, errors.New("stage: token must be printable ASCII without spaces, at most 4096 bytes")
	}
	if len(repos) == 0 {
		return nil, errors.New("stage: no repositories")
	}
	if len(repos) > maxSeeds {
		return nil, fmt.Errorf("stage: more than %d repositories", maxSeeds)
	}
	if _, err := os.Lstat(filepath.Join(o.PrivateRoot, SeedMapName)); !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("stage: %s already exists (run Release first)", SeedMapName)
	}
	seen := map[string]bool{}
	plan := make([]plannedRepo, 0, len(repos))
	for _, r := range repos {
		if err := ValidateSlug(r.Slug); err != nil {
			return nil, fmt.Errorf("stage: %w", err)
		}
		slug := NormalizeSlug(r.Slug)
		if seen[slug] {
			return nil, fmt.Errorf("stage: repository %s listed twice", slug)
		}
		seen[slug] = true
		if !validSensitivity(r.Sensitivity) {
			return nil, fmt.Errorf("stage %s: unknown sensitivity %q", slug, r.Sensitivity)
		}
		if r.Ref != "" {
			if err := ValidateRef(r.Ref); err != nil {
				return nil, fmt.Errorf("stage %s: %w", slug, err)
			}
		}
		src, kind, err := resolveSource(r, o.ServerURL)
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", slug, err)
		}
		cred := kind == sourceRemote && sameHost(src, o.ServerURL)
		plan = append(plan, plannedRepo{slug: slug, sensitivity: r.Sensitivity, source: src, kind: kind, ref: r.Ref, credential: cred})
	}
	return plan, nil
}

// checkRoot requires the private root to be an absolute, clean path to a real
// directory owned by the caller with no group or other permissions.
func checkRoot(root string) error {
	if !filepath.IsAbs(root) || filepath.Clean(root) != root {
		return fmt.Errorf("private root %q: must be a clean absolute path", root)
	}
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		return fmt.Errorf("private root %s: %w", root, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("private root %s: not a directory (or a symlink)", root)
	case st.Uid != uint32(unix.Geteuid()):
		return fmt.Errorf("private root %s: owned by uid %d", root, st.Uid)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("private root %s: mode %04o is open to group or others", root, st.Mode&0o7777)
	}
	return nil
}

// stageOne fetches, scrubs, seals and verifies one seed.
func stageOne(ctx context.Context, g *gitRunner, seedsDir, runID string, p plannedRepo) (Seed, error) {
	id := SeedID(runID, p.slug)
	dir := filepath.Join(seedsDir, id)
	if p.kind == sourceLocal {
		if err := checkLocalSource(ctx, p.source); err != nil {
			return Seed{}, err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return Seed{}, fmt.Errorf("seed directory: %w", err)
	}
	fetcher := g
	if !p.credential {
		fetcher = g.anonymous()
	}
	if err := fetchSeed(ctx, fetcher, seedsDir, dir, p); err != nil {
		return Seed{}, err
	}
	commit, err := scrubSeed(ctx, g, dir)
	if err != nil {
		return Seed{}, err
	}
	if err := makeReadOnly(ctx, g, dir); err != nil {
		return Seed{}, err
	}
	if err := VerifyReadOnly(ctx, dir); err != nil {
		return Seed{}, err
	}
	return Seed{Repo: p.slug, SeedID: id, Dir: dir, Commit: commit, Sensitivity: p.sensitivity}, nil
}

// fetchSeed makes dir a depth-1 checkout of the repository's default branch,
// or of the configured ref. A local source goes through git's transport like
// a remote one (--no-local), so nothing of it is copied or linked in place.
func fetchSeed(ctx context.Context, g *gitRunner, cwd, dir string, p plannedRepo) error {
	// --no-recurse-submodules, not --recurse-submodules=no: the latter is a
	// pathspec and would clone a submodule at the path "no".
	if p.ref == "" {
		_, err := g.run(ctx, cwd, "clone", "--quiet", "--depth=1", "--single-branch", "--no-tags",
			"--no-hardlinks", "--no-local", "--no-recurse-submodules", "--", p.source, dir)
		return err
	}
	if _, err := g.run(ctx, cwd, "init", "--quiet", "--", dir); err != nil {
		return err
	}
	if _, err := g.run(ctx, dir, "fetch", "--quiet", "--depth=1", "--no-tags", "--no-recurse-submodules",
		p.source, p.ref); err != nil {
		return err
	}
	_, err := g.run(ctx, dir, "checkout", "--quiet", "--detach", "FETCH_HEAD^{commit}")
	return err
}

// removeSeeds removes the seeds directory and everything in it.
func removeSeeds(ctx context.Context, seedsDir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(seedsDir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("remove seeds: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("remove seeds: %s is not a directory", seedsDir)
	}
	if err := restoreWritable(ctx, seedsDir); err != nil {
		return fmt.Errorf("remove seeds: %w", err)
	}
	if err := os.RemoveAll(seedsDir); err != nil {
		return fmt.Errorf("remove seeds: %w", err)
	}
	return nil
}

// Release restores write bits and removes every seed under privateRoot.
// It also removes the seed map and any staging leftover (token file, askpass
// helper, isolated HOME) from an interrupted run. It is idempotent.
func Release(ctx context.Context, privateRoot string) error {
	if !filepath.IsAbs(privateRoot) {
		return fmt.Errorf("release: private root %q is not absolute", privateRoot)
	}
	var errs []error
	if err := removeSeeds(ctx, filepath.Join(privateRoot, SeedsDirName)); err != nil {
		errs = append(errs, err)
	}
	for _, name := range []string{SeedMapName, tokenFileName, askpassName} {
		p := filepath.Join(privateRoot, name)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("release: %w", err))
		}
	}
	if err := os.RemoveAll(filepath.Join(privateRoot, stagingHomeName)); err != nil {
		errs = append(errs, fmt.Errorf("release: %w", err))
	}
	return errors.Join(errs...)
}
