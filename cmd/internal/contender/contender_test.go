package contender

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommitBuildsAndCleansUp builds a program of HEAD from the clone's
// history into the temporary directory, which Close removes; the clone's
// worktree list is left as it was.
func TestCommitBuildsAndCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	ctx := context.Background()
	b, err := New(ctx)
	if err != nil {
		t.Skipf("not in a git clone: %v", err)
	}
	b.extract = true // HEAD of a clean clone would be built in place
	before, err := git(ctx, b.root, "worktree", "list", "--porcelain")
	require.NoError(t, err)
	// The package is found at the first of its paths that the commit has:
	// a program that moved still builds from a commit before the move.
	bin, hash, err := b.Commit(ctx, "HEAD", "./examples/no-such-program", "./examples/quickstart")
	require.NoError(t, err)
	require.Len(t, hash, 40)
	st, err := os.Stat(bin)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&0o100, "not executable")
	entries, err := os.ReadDir(b.dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the extracted tree is removed once built")
	after, err := git(ctx, b.root, "worktree", "list", "--porcelain")
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoError(t, b.Close())
	_, err = os.Stat(b.dir)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestHeadOfCleanTreeBuiltInPlace: a commit that is the working tree (HEAD,
// nothing changed, staged or untracked outside .gitignore) is built in the
// repository itself, where go's build cache holds its packages, without an
// extracted copy; any other state extracts the commit, and the program
// built is the commit's, not the working tree's.
func TestHeadOfCleanTreeBuiltInPlace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	root := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	write := func(name, text string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(text), 0o644))
	}
	write("go.mod", "module example.com/prog\n\ngo 1.22\n")
	write("cmd/prog/main.go", "package main\n\nfunc main() { println(\"v1\") }\n")
	write(".gitignore", "/out/\n")
	run("init", "-q")
	run("add", ".")
	run("commit", "-q", "-m", "prog")
	b := &Build{dir: t.TempDir(), root: root}
	for _, step := range []struct {
		name    string
		change  func()
		inPlace bool
	}{
		{"clean", func() {}, true},
		{"ignored file", func() { write("out/x.txt", "x") }, true},
		{"untracked file", func() { write("notes.txt", "x") }, false},
		{"staged file", func() { run("add", "notes.txt") }, false},
		{"committed", func() { run("commit", "-q", "-m", "notes") }, true},
		{"changed file", func() { write("cmd/prog/main.go", "package main\n\nfunc main() { println(\"v2\") }\n") }, false},
	} {
		step.change()
		before := b.extracted
		bin, _, err := b.Commit(ctx, "HEAD", "./cmd/prog")
		require.NoError(t, err, step.name)
		require.Equal(t, !step.inPlace, b.extracted > before, "%s: extracted", step.name)
		out, err := exec.Command(bin).CombinedOutput()
		require.NoError(t, err, step.name)
		require.Equal(t, "v1\n", string(out), "%s: the commit's program", step.name)
	}
}

// TestUnknownCommit: a commit the clone lacks fails with a message that
// says so, before anything is extracted or built.
func TestUnknownCommit(t *testing.T) {
	ctx := context.Background()
	b, err := New(ctx)
	if err != nil {
		t.Skipf("not in a git clone: %v", err)
	}
	defer b.Close()
	_, _, err = b.Commit(ctx, "0123456789abcdef0123456789abcdef01234567", "./cmd/internal/redisbench")
	require.ErrorContains(t, err, "not in this clone's history")
	_, _, err = b.Commit(ctx, "--output=/tmp/x", "./cmd/internal/redisbench")
	require.ErrorContains(t, err, "invalid commit")
}

// TestOutsideAClone: outside a git clone New fails saying so.
func TestOutsideAClone(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := New(context.Background())
	require.Error(t, err)
	require.Contains(t, err.Error(), "not in a git clone")
}

// TestUntarRefusesEscapes: an archive entry that leaves the directory is
// refused.
func TestUntarRefusesEscapes(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "../evil", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}))
	_, err := tw.Write([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	err = untar(&buf, dir)
	require.ErrorContains(t, err, "leaves the directory")
	_, err = os.Stat(filepath.Join(filepath.Dir(dir), "evil"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestFirstAlternates(t *testing.T) {
	a, b := First(0)
	c, d := First(1)
	require.Equal(t, [4]int{0, 1, 1, 0}, [4]int{a, b, c, d})
}
