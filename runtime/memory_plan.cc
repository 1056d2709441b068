#include "runtime/memory_plan.h"

#include <algorithm>
#include <map>

namespace sparq {

namespace {

constexpr int64_t kAlign = 64;

int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct Region {
  int root = -1;
  int64_t bytes = 0;
  int start = 0, end = 0;  // steps, inclusive: live from its producer to its last reader
  int64_t offset = -1;
  int step = 0;
  size_t output = 0;
};

}  // namespace

MemoryPlan PlanMemory(const MemoryRecord& record, const std::vector<std::vector<int>>& step_outputs,
                      const std::vector<int>& last_use, const std::vector<bool>& kept,
                      const std::vector<std::vector<int>>& in_place) {
  MemoryPlan plan;
  const size_t steps = step_outputs.size();
  const size_t slots = record.root.size();
  plan.offset.resize(steps);
  plan.bytes.resize(steps);
  plan.in_arena.assign(slots, 0);
  plan.in_place_of.assign(steps, -1);
  plan.in_place_bytes.assign(steps, -1);
  for (size_t i = 0; i < steps; ++i) {
    plan.offset[i].assign(step_outputs[i].size(), -1);
    plan.bytes[i].assign(step_outputs[i].size(), -1);
  }
  auto requested = [&](size_t i, size_t k) -> int64_t {
    return i < record.requested.size() && k < record.requested[i].size() ? record.requested[i][k] : -1;
  };
  // Each root's group: its views. A group with a kept member is not placed.
  std::map<int, int> last_of_group;
  std::map<int, bool> kept_group;
  for (size_t s = 0; s < slots; ++s) {
    const int r = record.root[s];
    if (r < 0) continue;
    const int end = last_use[s] >= 0 ? last_use[s] : record.produced_at[s];
    last_of_group[r] = std::max(last_of_group.count(r) ? last_of_group[r] : end, end);
    if (kept[s]) kept_group[r] = true;
  }
  // In place: output 0 of step i joins the group of an input that row may
  // overwrite when that group dies at step i and has the output's bytes; the
  // two groups are then one region, live to the later of their last uses.
  std::vector<int> group(slots);  // a root's group after the merges (a union-find parent)
  for (size_t s = 0; s < slots; ++s) group[s] = static_cast<int>(s);
  auto find = [&](int s) {
    while (group[s] != s) s = group[s] = group[group[s]];
    return s;
  };
  std::vector<int64_t> group_bytes(slots, -1);  // a placed group's bytes, by its root
  for (size_t i = 0; i < steps; ++i)
    for (size_t k = 0; k < step_outputs[i].size(); ++k) {
      const int s = step_outputs[i][k];
      if (s >= 0 && record.root[s] == s && !kept_group.count(s) && requested(i, k) > 0) group_bytes[s] = AlignUp(requested(i, k));
    }
  for (size_t i = 0; i < steps && i < in_place.size(); ++i) {
    if (step_outputs[i].empty() || in_place[i].empty()) continue;
    const int s = step_outputs[i][0];
    if (s < 0 || record.root[s] != s || kept_group.count(s) || requested(i, 0) <= 0) continue;
    for (int t : in_place[i]) {
      if (t < 0 || record.root[t] < 0) continue;
      const int g = find(record.root[t]);
      if (g == s || group_bytes[g] < 0 || group_bytes[g] != group_bytes[s] || last_of_group[g] != static_cast<int>(i)) {
        continue;
      }
      group[s] = g;
      last_of_group[g] = std::max(last_of_group[g], last_of_group[s]);
      plan.in_place_of[i] = t;
      plan.in_place_bytes[i] = requested(i, 0);
      break;
    }
  }
  std::vector<Region> regions;
  for (size_t i = 0; i < steps; ++i)
    for (size_t k = 0; k < step_outputs[i].size(); ++k) {
      const int s = step_outputs[i][k];
      if (s < 0 || requested(i, k) <= 0 || record.root[s] != s || kept_group.count(s) || find(s) != s) continue;
      Region r;
      r.root = s;
      r.bytes = AlignUp(requested(i, k));
      r.start = static_cast<int>(i);
      r.end = std::max(last_of_group[s], r.start);
      r.step = static_cast<int>(i);
      r.output = k;
      regions.push_back(r);
    }
  // Largest first (ties: earlier first), each at the lowest offset where it
  // overlaps no placed region that is live at the same time.
  std::vector<size_t> order(regions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return regions[a].bytes > regions[b].bytes; });
  std::vector<const Region*> placed;
  for (size_t idx : order) {
    Region& r = regions[idx];
    std::vector<const Region*> live;
    for (const Region* p : placed)
      if (p->start <= r.end && r.start <= p->end) live.push_back(p);
    std::sort(live.begin(), live.end(), [](const Region* a, const Region* b) { return a->offset < b->offset; });
    int64_t offset = 0;
    for (const Region* p : live) {
      if (offset + r.bytes <= p->offset) break;
      offset = std::max(offset, p->offset + p->bytes);
    }
    r.offset = offset;
    plan.total = std::max(plan.total, offset + r.bytes);
    placed.push_back(&r);
  }
  std::vector<const Region*> region_of(slots, nullptr);  // by group root
  for (const Region& r : regions) region_of[r.root] = &r;
  for (size_t i = 0; i < steps; ++i)
    for (size_t k = 0; k < step_outputs[i].size(); ++k) {
      const int s = step_outputs[i][k];
      if (s < 0 || requested(i, k) <= 0 || record.root[s] != s || kept_group.count(s)) continue;
      const Region* r = region_of[find(s)];
      if (r == nullptr) continue;
      plan.offset[i][k] = r->offset;
      plan.bytes[i][k] = r->bytes;
      ++plan.values;
    }
  for (size_t s = 0; s < slots; ++s) {
    const int r = record.root[s];
    if (r >= 0 && !kept_group.count(r) && region_of[find(r)] != nullptr) plan.in_arena[s] = 1;
  }
  return plan;
}

}  // namespace sparq
