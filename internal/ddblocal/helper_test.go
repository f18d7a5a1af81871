package ddblocal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The container path itself is tested in its own module
// (internal/ddblocal/container), with the helper it builds. These tests
// cover the harness's side without Docker.

func TestSourceFromEnv(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Source{"": "", " java ": SourceJava, "Testcontainers": SourceContainer} {
		got, err := sourceFromEnv(func(string) string { return in })
		require.NoError(t, err, "sourceFromEnv(%q)", in)
		assert.Equal(t, want, got, "sourceFromEnv(%q)", in)
	}
	got, err := sourceFromEnv(func(string) string { return "docker" })
	assert.Error(t, err, "sourceFromEnv(docker) = %q, want an error", got)
}

func TestContainerErrorOneLine(t *testing.T) {
	t.Parallel()
	err := &containerError{reason: ReasonPullRefused, err: errors.New("a\n\n  b  \nc"), hint: "run x"}
	assert.Equal(t, "pull refused: a; b; c (run x)", err.Error())
	err.hint = ""
	assert.Equal(t, "pull refused: a; b; c", err.Error())
}

// TestMakefileImage: `make docker-image` builds the image the harness runs.
func TestMakefileImage(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	root, err := repoRoot(wd)
	require.NoError(t, err)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^DYNAMODB_LOCAL_IMAGE\s*:?=\s*(\S+)\s*$`).FindSubmatch(mk)
	require.NotNil(t, m, "no DYNAMODB_LOCAL_IMAGE in the Makefile")
	assert.Equal(t, ContainerImage, string(m[1]), "the Makefile builds %s, the harness runs %s", m[1], ContainerImage)
}

// startHere runs Start as a test package would, with the server closed
// when the test ends.
func startHere(t *testing.T) (*Server, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
	defer cancel()
	srv, err := Start(ctx)
	if err == nil {
		t.Cleanup(func() { srv.Close() })
	}
	return srv, err
}

// TestStartWithoutHelper: without the helper program the harness serves
// the jar and says in one line how to build the helper; with
// ZAEL_DYNAMODB_SOURCE=testcontainers it fails, naming the command.
func TestStartWithoutHelper(t *testing.T) {
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvContainerHelper, filepath.Join(t.TempDir(), "no-such-helper"))
	t.Run("fallback", func(t *testing.T) {
		t.Setenv(EnvSource, "")
		srv, err := startHere(t)
		if err != nil {
			unavailable(t, err, os.Getenv)
			return
		}
		assert.Equal(t, SourceJava, srv.Source())
		assert.Regexp(t, "^"+regexp.QuoteMeta("testcontainers: "+ReasonNoHelper+": "), srv.Fallback())
		assert.Contains(t, srv.Fallback(), "(run `"+HelperCommand+"`)")
		assert.NotContains(t, srv.Fallback(), "\n")
	})
	t.Run("only container", func(t *testing.T) {
		t.Setenv(EnvSource, "testcontainers")
		_, err := startHere(t)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "testcontainers: "+ReasonNoHelper+": ")
		assert.Contains(t, err.Error(), HelperCommand)
		assert.Contains(t, err.Error(), "no fallback to the jar")
	})
}

// TestHelperWithoutResult: a helper that exits without its line (here
// true(1)) is a failed container, reported at once with what it wrote.
func TestHelperWithoutResult(t *testing.T) {
	t.Parallel()
	helper, err := exec.LookPath("true")
	if err != nil {
		t.Skipf("no true(1) on PATH: %v", err)
	}
	srv, err := runHelper(t.Context(), helper)
	if err == nil {
		srv.Close()
	}
	var ce *containerError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, ReasonContainerFailed, ce.reason)
	assert.Contains(t, err.Error(), `wrote "", not a result line`)
}
