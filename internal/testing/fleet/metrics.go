package fleet

import (
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics scrapes the instance's /metrics.
func (i *Instance) Metrics(ctx context.Context) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, i.OpsURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	return Metrics(families), err
}

// Metrics is one scrape, by metric family name.
type Metrics map[string]*dto.MetricFamily

// Sum adds up the samples of a counter, gauge or untyped family (or the
// sample counts of a histogram) whose labels include every label given.
func (m Metrics) Sum(name string, labels map[string]string) float64 {
	family, ok := m[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, metric := range family.GetMetric() {
		if !hasLabels(metric, labels) {
			continue
		}
		switch {
		case metric.Counter != nil:
			sum += metric.GetCounter().GetValue()
		case metric.Gauge != nil:
			sum += metric.GetGauge().GetValue()
		case metric.Histogram != nil:
			sum += float64(metric.GetHistogram().GetSampleCount())
		case metric.Untyped != nil:
			sum += metric.GetUntyped().GetValue()
		}
	}
	return sum
}

func hasLabels(metric *dto.Metric, want map[string]string) bool {
	found := 0
	for _, pair := range metric.GetLabel() {
		if v, ok := want[pair.GetName()]; ok && v == pair.GetValue() {
			found++
		}
	}
	return found == len(want)
}
