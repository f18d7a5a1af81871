package infra

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/motoserver"
)

// The deployer's tests run against moto's server (internal/motoserver: one
// per test binary, started by the first test that needs it; skipped without
// moto, failed in CI or with ZAEL_REQUIRE_MOTO=1; $ZAEL_MOTO_ENDPOINT names a
// running one instead).

func TestMain(m *testing.M) { os.Exit(motoserver.Main(m)) }

// motoConfig returns an AWS config for the package's moto server.
func motoConfig(t *testing.T) aws.Config {
	t.Helper()
	return motoserver.Config(t)
}

// testZip returns a small zip with a `bootstrap` file whose content is body.
func testZip(t *testing.T, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := w.CreateHeader(h)
	require.NoError(t, err)
	_, err = f.Write([]byte("#!/bin/sh\n" + body + "\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

var stackSeq struct {
	sync.Mutex
	n int
}

// stackName returns a stack name unique within the moto server.
func stackName(t *testing.T) string {
	stackSeq.Lock()
	defer stackSeq.Unlock()
	stackSeq.n++
	return fmt.Sprintf("zl-test-%d-%d", time.Now().UnixNano()%1_000_000, stackSeq.n)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
