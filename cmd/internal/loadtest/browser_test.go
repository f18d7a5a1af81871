package loadtest

import (
	"context"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/skiplog"
)

// chromiumFlags are the flags of every headless run: no sandbox (CI runs as
// root), no GPU, and nothing that reaches the network.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
}

// findChromium returns a headless-capable Chromium, or skips the test
// (fails it in CI; `make test` installs Debian's chromium as root).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (apt-get install chromium; make test installs it as root)"
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	require.False(t, ci, msg)
	skiplog.Skip(t, "chromium", msg)
	return ""
}

// syntheticResult is a 30-second run with a latency that rises and falls,
// some denials and a burst of failures.
func syntheticResult() *Result {
	r := NewResult()
	r.Scenario = Scenario{Entities: 100, HotKeys: 5, HotShare: 0.5, RPM: 600, TPM: 100_000, TokensEstimate: 500,
		TokensActual: [2]int64{200, 900}, Concurrency: 16, Duration: Duration(30 * time.Second), Prefix: "load"}
	r.Endpoint = "http://127.0.0.1:8000 table zae-limiter"
	r.Procs = 2
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r.Start, r.End = start, start.Add(30*time.Second)
	rec := NewRecorder(r)
	rnd := rand.New(rand.NewPCG(1, 1))
	for sec := range 30 {
		base := time.Duration(2+sec%10) * time.Millisecond
		for range 50 + 10*(sec%7) {
			end := start.Add(time.Duration(sec)*time.Second + time.Duration(rnd.IntN(1000))*time.Millisecond)
			lat := base + time.Duration(rnd.ExpFloat64()*float64(time.Millisecond))
			switch {
			case sec >= 20 && sec < 23 && rnd.IntN(4) == 0:
				rec.Record(end, Failed, lat, 0, nil, nil, context.DeadlineExceeded)
			case rnd.IntN(10) == 0:
				rec.Record(end, Denied, lat, 0, nil, nil, nil)
			default:
				rec.Record(end, Admitted, lat, 2*lat, map[string]int64{"rpm": 1, "tpm": 500}, nil, nil)
			}
		}
	}
	rec.recordCall("UpdateItem", OpStats{Calls: 1800, Errors: 40, ConditionalFailures: 40, Reported: 1760, WCU: 3520})
	rec.recordCall("BatchGetItem", OpStats{Calls: 60, Reported: 60, RCU: 30, Items: 60})
	return r
}

// TestHTMLReportInBrowser renders the report in headless Chromium: the DOM
// has the three charts with their lines and bars, and the screenshot shows
// them (a good share of non-white pixels, and pixels in the colours of the
// admitted line and of the histogram bars).
func TestHTMLReportInBrowser(t *testing.T) {
	chromium := findChromium(t)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.html")
	f, err := os.Create(report)
	require.NoError(t, err)
	require.NoError(t, WriteHTML(f, syntheticResult(), true, DefaultPrices))
	f.Close()
	browse := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		all := append(append(append([]string{}, chromiumFlags...), "--user-data-dir="+filepath.Join(dir, "profile")), args...)
		cmd := exec.CommandContext(ctx, chromium, append(all, "file://"+report)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "chromium %s\n%s", strings.Join(args, " "), stderr.String())
		return out
	}

	dom := string(browse("--dump-dom"))
	for _, want := range []string{`<svg id="throughput"`, `<svg id="latency-over-time"`, `<svg id="histogram"`, `id="cost"`} {
		assert.Contains(t, dom, want, "rendered DOM")
	}
	assert.Equal(t, 6, strings.Count(dom, "<polyline"), "polylines of the rendered DOM")
	assert.GreaterOrEqual(t, strings.Count(dom, `<rect class="bar"`), 10, "histogram bars of the rendered DOM")

	shot := filepath.Join(dir, "shot.png")
	browse("--window-size=1000,1400", "--hide-scrollbars", "--screenshot="+shot)
	pf, err := os.Open(shot)
	require.NoError(t, err)
	defer pf.Close()
	img, err := png.Decode(pf)
	require.NoError(t, err, "screenshot")
	b := img.Bounds()
	var nonWhite, green, blue int
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if c.R < 240 || c.G < 240 || c.B < 240 {
				nonWhite++
			}
			if near(c, 0x2e, 0x7d, 0x32) {
				green++
			}
			if near(c, 0x15, 0x65, 0xc0) {
				blue++
			}
		}
	}
	total := b.Dx() * b.Dy()
	t.Logf("screenshot %dx%d: %d non-white, %d admitted-green, %d bar-blue pixels", b.Dx(), b.Dy(), nonWhite, green, blue)
	assert.GreaterOrEqual(t, nonWhite, total/50, "screenshot nearly blank: pixels not white")
	assert.GreaterOrEqual(t, green, 200, "charts not drawn: pixels of the admitted line")
	assert.GreaterOrEqual(t, blue, 2000, "charts not drawn: pixels of the histogram bars")
	if t.Failed() {
		if dst := os.Getenv("LOADTEST_KEEP_SCREENSHOT"); dst != "" {
			data, _ := os.ReadFile(shot)
			_ = os.WriteFile(dst, data, 0o644)
		}
	}
}

// near reports whether c is within a small distance of the colour r, g, b.
func near(c color.RGBA, r, g, b uint8) bool {
	d := func(a, b uint8) int {
		if a > b {
			return int(a - b)
		}
		return int(b - a)
	}
	return d(c.R, r) < 24 && d(c.G, g) < 24 && d(c.B, b) < 24
}
