package infra

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// The deployer's tests run against moto's server (`python3 -m moto.server`),
// started once for the package on a free loopback port and stopped when
// the tests are done. $ZAEL_MOTO_ENDPOINT names a running one instead.
// Without moto the tests that need it are skipped, except in CI (CI=true)
// or with ZAEL_REQUIRE_MOTO=1, where they fail.

var (
	motoURL string
	motoErr error
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if ep := os.Getenv("ZAEL_MOTO_ENDPOINT"); ep != "" {
		motoURL = ep
		return m.Run()
	}
	start := time.Now()
	url, stop, err := startMoto(30 * time.Second)
	if err != nil {
		motoErr = err
		fmt.Fprintf(os.Stderr, "infra: moto server unavailable: %v\n", err)
	} else {
		motoURL = url
		defer stop()
		fmt.Fprintf(os.Stderr, "infra: moto server at %s, ready in %v\n", url, time.Since(start).Round(10*time.Millisecond))
	}
	return m.Run()
}

// startMoto starts moto's server on a free loopback port and waits until it
// answers.
func startMoto(timeout time.Duration) (url string, stop func(), err error) {
	python, err := exec.LookPath("python3")
	if err != nil {
		return "", nil, fmt.Errorf("python3 not found: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	var stderr bytes.Buffer
	cmd := exec.Command(python, "-m", "moto.server", "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start moto: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}

	url = fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(url + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return url, stop, nil
		}
		select {
		case err := <-exited:
			exited <- err // for stop
			return "", nil, fmt.Errorf("moto exited (%v): %s", err, strings.TrimSpace(lastLines(stderr.String(), 3)))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("moto did not answer within %v", timeout)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// motoConfig returns an AWS config for the package's moto server, or skips
// (fails in CI) when there is none.
func motoConfig(t *testing.T) aws.Config {
	t.Helper()
	if motoURL == "" {
		msg := fmt.Sprintf("moto server unavailable: %v (needs `python3 -m moto.server`: pip install 'moto[server]')", motoErr)
		if os.Getenv("CI") == "true" || os.Getenv("ZAEL_REQUIRE_MOTO") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint: aws.String(motoURL),
	}
}

// testZip returns a small zip with a `bootstrap` file whose content is body.
func testZip(t *testing.T, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := w.CreateHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("#!/bin/sh\n" + body + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
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
