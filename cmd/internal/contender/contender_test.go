package contender

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
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
