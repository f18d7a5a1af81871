// Package contender builds the benchmark programs of an earlier commit of
// this repository beside the current code's, so that a benchmark can run
// both in alternating rounds of one run (CONTENDER=<commit> of `make
// bench-redis` and `make bench-floor`, `zae-limiter load --contender`): a
// regression then shows as a ratio measured on the same machine at the
// same moments, not as a difference between runs on different days.
//
// The commit's tree is read from the clone's history with `git archive`
// into a temporary directory outside the repository (nothing in the clone,
// its index or its worktree list changes) and built there with `go build`;
// [Build.Close] removes the directory. A commit that is the working tree
// (HEAD, with nothing changed or added) is built in place instead, from the
// packages go's build cache already holds. It needs git and a clone that holds
// the commit: a clean clone does, a shallow one may not, and the error
// says which.
package contender

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build is a temporary directory holding built programs.
type Build struct {
	dir  string
	root string // the repository's top directory
	// extract builds every commit from an extracted copy, even one whose
	// tree is the working tree's, and extracted counts the copies (test
	// seams).
	extract   bool
	extracted int
}

// New creates the temporary directory for programs built from the
// repository that holds the working directory. It fails, saying why, when
// git is missing or the working directory is not in a git clone.
func New(ctx context.Context) (*Build, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, errors.New("contender: git is not on $PATH: building an earlier commit needs git and a clone with its history")
	}
	root, err := git(ctx, "", "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("contender: the working directory is not in a git clone of the repository (run from a clone with its history): %w", err)
	}
	dir, err := os.MkdirTemp("", "zael-contender-")
	if err != nil {
		return nil, fmt.Errorf("contender: %w", err)
	}
	return &Build{dir: dir, root: root}, nil
}

// Close removes the directory and every program built in it.
func (b *Build) Close() error { return os.RemoveAll(b.dir) }

// Current builds package pkg (a path relative to the repository's top
// directory, such as "./cmd/internal/redisbench") of the working tree as it is,
// uncommitted changes included, and returns the program's path.
func (b *Build) Current(ctx context.Context, pkg string) (string, error) {
	out := filepath.Join(b.dir, "current-"+filepath.Base(pkg))
	if err := goBuild(ctx, b.root, pkg, out); err != nil {
		return "", fmt.Errorf("contender: build the current %s: %w", pkg, err)
	}
	return out, nil
}

// Commit builds package pkg of commit (anything git rev-parse resolves:
// a hash, a tag, a branch, HEAD~3) and returns the program's path and the
// commit's full hash. The commit's tree is extracted into the temporary
// directory, built there, and removed once built. A commit that has no pkg
// is built from the first of formerly (the package's earlier paths) that
// it has, so that a program that moved can still run beside its past.
func (b *Build) Commit(ctx context.Context, commit, pkg string, formerly ...string) (bin, hash string, err error) {
	if commit == "" || strings.HasPrefix(commit, "-") {
		return "", "", fmt.Errorf("contender: invalid commit %q", commit)
	}
	hash, err = git(ctx, b.root, "rev-parse", "--verify", "--quiet", commit+"^{commit}")
	if err != nil {
		why := "it is not in this clone's history"
		if s, _ := git(ctx, b.root, "rev-parse", "--is-shallow-repository"); s == "true" {
			why += " (the clone is shallow: git fetch --unshallow)"
		}
		return "", "", fmt.Errorf("contender: commit %q: %s", commit, why)
	}
	if !b.extract && b.isWorkingTree(ctx, hash) {
		// HEAD with nothing changed or added: the commit is the working
		// tree, whose packages go's build cache already holds (the
		// current program's build, the tests'); an extracted copy
		// would compile all of them again under other paths.
		if pkg, err = firstPackage(b.root, hash, pkg, formerly); err != nil {
			return "", "", err
		}
		bin = filepath.Join(b.dir, hash[:12]+"-"+filepath.Base(pkg))
		if err := goBuild(ctx, b.root, pkg, bin); err != nil {
			return "", "", fmt.Errorf("contender: build %s of %s: %w", pkg, hash[:12], err)
		}
		return bin, hash, nil
	}
	b.extracted++
	src := filepath.Join(b.dir, "src-"+hash[:12])
	if err := extract(ctx, b.root, hash, src); err != nil {
		return "", "", fmt.Errorf("contender: extract %s: %w", hash[:12], err)
	}
	defer os.RemoveAll(src)
	if pkg, err = firstPackage(src, hash, pkg, formerly); err != nil {
		return "", "", err
	}
	bin = filepath.Join(b.dir, hash[:12]+"-"+filepath.Base(pkg))
	if err := goBuild(ctx, src, pkg, bin); err != nil {
		return "", "", fmt.Errorf("contender: build %s of %s: %w", pkg, hash[:12], err)
	}
	return bin, hash, nil
}

// firstPackage returns the first of pkg and formerly that the tree in
// dir (commit hash's) has.
func firstPackage(dir, hash, pkg string, formerly []string) (string, error) {
	for _, p := range append([]string{pkg}, formerly...) {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("contender: commit %s has no %s", hash[:12], pkg)
}

// isWorkingTree reports whether commit hash is HEAD and the working tree
// holds nothing else: no change, staged or not, and no untracked file
// outside .gitignore.
func (b *Build) isWorkingTree(ctx context.Context, hash string) bool {
	head, err := git(ctx, b.root, "rev-parse", "HEAD")
	if err != nil || head != hash {
		return false
	}
	status, err := git(ctx, b.root, "status", "--porcelain", "--untracked-files=all")
	return err == nil && status == ""
}

// git runs git in dir and returns its output, trimmed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if s := strings.TrimSpace(stderr.String()); s != "" {
			return "", fmt.Errorf("git %s: %w: %s", args[0], err, s)
		}
		return "", fmt.Errorf("git %s: %w", args[0], err)
	}
	return strings.TrimSpace(string(out)), nil
}

// extract writes the tree of commit hash into dir, from `git archive`.
func extract(ctx context.Context, root, hash, dir string) error {
	cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar", hash)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	terr := untar(pipe, dir)
	_, _ = io.Copy(io.Discard, pipe)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return terr
}

// untar writes the regular files, directories and symbolic links of a tar
// stream under dir, refusing names that leave it.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.FromSlash(h.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("archive entry %q leaves the directory", h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		}
	}
}

// goBuild builds package pkg of the module in dir into out, outside any
// go.work, with the go command that runs this program's builds.
func goBuild(ctx context.Context, dir, pkg, out string) error {
	gobin := "go"
	if g := os.Getenv("GO"); g != "" {
		gobin = g
	}
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// First returns which of two contenders goes first in round r: they
// alternate, so that neither always runs on a machine the other warmed.
func First(r int) (first, second int) {
	if r%2 == 0 {
		return 0, 1
	}
	return 1, 0
}
