package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/zaelimiter/limiter/cmd/internal/contender"
)

// runContender is -contender: the benchmark of this tree and of an
// earlier commit, each built as a program of its own, run case by case in
// alternating rounds on one redis-server (addr). Each program runs one
// round of the case at a time (its own alternation against its B side in
// fine turns), and the report puts, per case, both programs' ratios A/B
// and the ratio of this tree's A to the commit's A, raw (ops/s) and
// normalised (the ratio of the two A/B ratios, which cancels what the
// machine's load did to both between the programs' turns).
func runContender(ctx context.Context, w io.Writer, cfg config, addr string, names []string) error {
	b, err := contender.New(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(w, "building this tree and %s ...\n", cfg.contender)
	cur, err := b.Current(ctx, "./cmd/internal/redisbench")
	if err != nil {
		return err
	}
	old, hash, err := b.Commit(ctx, cfg.contender, "./cmd/internal/redisbench", "./internal/redisbench")
	if err != nil {
		return err
	}
	bins := [2]string{cur, old}
	fmt.Fprintf(w, "contender %s (%s), %d alternating rounds per case, each program one round of the case per turn\n", cfg.contender, hash[:12], cfg.rounds)
	fmt.Fprintf(w, "A/B: the program's ratio of its A's ops/s to its B's (B: redis_rate unless the case names it); now/then: this tree's A ÷ the commit's A, ops/s and normalised (now's A/B ÷ then's A/B); median [min–max] of the rounds\n\n")
	fmt.Fprintf(w, "%-60s %22s %22s %22s %22s\n", "case", "A/B now", "A/B then", "now/then ops/s", "now/then normalised")
	for _, name := range names {
		var abNow, abThen, raw, norm []float64
		missing := false
		for r := range cfg.rounds {
			var res [2]caseResult
			first, second := contender.First(r)
			ok := true
			for _, i := range []int{first, second} {
				args := []string{"-addr", addr, "-rounds", "1", "-run", "^" + regexp.QuoteMeta(name) + "$", "-ops", strconv.Itoa(cfg.ops)}
				if cfg.slices > 0 {
					args = append(args, "-slices", strconv.Itoa(cfg.slices))
				}
				if cfg.scripts {
					args = append(args, "-scripts")
				}
				out, err := runProgram(ctx, bins[i], args)
				if err != nil {
					// A program whose run failed (a timeout on a loaded
					// machine, say) loses the round, not the case.
					fmt.Fprintf(w, "%-60s   round %d: %s\n", name, r+1, err)
					ok = false
					break
				}
				cr, ok := parseCase(out, name)
				if !ok {
					if i == 1 {
						missing = true
						break
					}
					return fmt.Errorf("%s: no result line in:\n%s", name, out)
				}
				res[i] = cr
			}
			if missing {
				break
			}
			if !ok {
				continue
			}
			abNow = append(abNow, res[0].a/res[0].b)
			abThen = append(abThen, res[1].a/res[1].b)
			raw = append(raw, res[0].a/res[1].a)
			norm = append(norm, (res[0].a/res[0].b)/(res[1].a/res[1].b))
		}
		if missing {
			fmt.Fprintf(w, "%-60s   (the contender has no such case)\n", name)
			continue
		}
		if len(raw) == 0 {
			fmt.Fprintf(w, "%-60s   (every round failed)\n", name)
			continue
		}
		fmt.Fprintf(w, "%-60s %22s %22s %22s %22s\n", name, spread(abNow), spread(abThen), spread(raw), spread(norm))
	}
	return nil
}

// caseResult is a program's ops/s of a case's two sides.
type caseResult struct{ a, b float64 }

// resultLine matches what follows a case's name on its result line: the
// ops/s of A and of B.
var resultLine = regexp.MustCompile(`^\s+([0-9]+)\s+([0-9]+)\s+[0-9.]+×`)

// parseCase finds the result line of case name in a program's output.
func parseCase(out, name string) (caseResult, bool) {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		m := resultLine.FindStringSubmatch(rest)
		if m == nil {
			continue
		}
		a, _ := strconv.ParseFloat(m[1], 64)
		b, _ := strconv.ParseFloat(m[2], 64)
		if a > 0 && b > 0 {
			return caseResult{a, b}, true
		}
	}
	return caseResult{}, false
}

// runProgram runs bin with args and returns its standard output.
func runProgram(ctx context.Context, bin string, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = os.Environ()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", bin, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// spread formats the median and range of v.
func spread(v []float64) string {
	s := slices.Clone(v)
	slices.Sort(s)
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", median(s), s[0], s[len(s)-1])
}
