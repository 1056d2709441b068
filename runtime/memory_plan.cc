#include "runtime/memory_plan.h"

#include <algorithm>
#include <limits>
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

// Step order: each region, when its producer runs, goes where the arena's
// bytes were touched most recently among the places free for its whole life.
//
// `touched` is the arena as runs of bytes, each with the last step that used
// it (the end of the region placed there last; kUntouched: never used). A
// region starting at step s may take bytes whose last use is before s: every
// region placed before it that is still live at s holds bytes used at s or
// later, and the regions placed after it start at s or later and see it as
// live. Its cost at an offset is the sum over its bytes of their age,
// s - 1 - last use (0: freed by the step before, still in cache), bytes
// never used costing as much as the oldest; the cheapest offset wins, the
// lowest on ties. Largest-first first fit (the layout before) packed the
// arena as tight but put outputs over bytes no step had touched for a long
// time: memory-bound rows then wrote to lines out of cache (bench/RESULTS.md,
// "Fast rows vs the reference, node by node").

// One run of arena bytes [lo, hi) and the last step that used them.
struct Touched {
  int64_t lo = 0, hi = 0;
  int last = 0;
};

constexpr int kUntouched = -2;  // bytes no region has used yet

void PlaceByRecency(size_t steps, std::vector<Region>* regions, int64_t* total) {
  std::vector<Touched> touched;  // consecutive runs covering [0, top)
  int64_t top = 0;
  const int64_t oldest = static_cast<int64_t>(steps) + 1;  // the age of bytes never used
  std::vector<int64_t> prefix;                             // prefix[i]: cost of touched[0, i)
  for (Region& r : *regions) {  // built in step order
    const int s = r.start;
    auto age = [&](const Touched& t) -> int64_t { return t.last == kUntouched ? oldest : s - 1 - t.last; };
    prefix.assign(touched.size() + 1, 0);
    for (size_t i = 0; i < touched.size(); ++i) prefix[i + 1] = prefix[i] + (touched[i].hi - touched[i].lo) * age(touched[i]);
    // The cost of the bytes [0, x): runs before x, then the untouched bytes past top.
    auto cost_to = [&](int64_t x) -> int64_t {
      if (x >= top) return prefix.back() + (x - top) * oldest;
      const auto it = std::upper_bound(touched.begin(), touched.end(), x,
                                       [](int64_t v, const Touched& t) { return v < t.hi; });
      const size_t i = static_cast<size_t>(it - touched.begin());
      return prefix[i] + (x - touched[i].lo) * age(touched[i]);
    };
    int64_t best = -1, best_cost = 0;
    auto consider = [&](int64_t o, int64_t lo, int64_t hi) {  // o within the free run [lo, hi)
      if (o < lo || o + r.bytes > hi) return;
      const int64_t c = cost_to(o + r.bytes) - cost_to(o);
      if (best < 0 || c < best_cost || (c == best_cost && o < best)) best = o, best_cost = c;
    };
    constexpr int64_t kOpen = std::numeric_limits<int64_t>::max() / 4;  // the free run past top
    for (size_t i = 0; i <= touched.size();) {
      if (i < touched.size() && touched[i].last >= s) {  // live
        ++i;
        continue;
      }
      const size_t first = i;
      while (i < touched.size() && touched[i].last < s) ++i;
      const int64_t lo = first < touched.size() ? touched[first].lo : top;
      const int64_t hi = i == touched.size() ? kOpen : touched[i].lo;
      consider(lo, lo, hi);
      if (hi != kOpen) consider(hi - r.bytes, lo, hi);
      for (size_t j = first + 1; j < i; ++j) {  // run boundaries: align the region's start or end to one
        consider(touched[j].lo, lo, hi);
        consider(touched[j].lo - r.bytes, lo, hi);
      }
      if (i == touched.size()) {
        if (first < touched.size()) consider(top - r.bytes, lo, hi);
        break;
      }
    }
    r.offset = best;
    const int64_t end = best + r.bytes;
    if (end > top) {
      touched.push_back({top, end, kUntouched});
      top = end;
    }
    // touched[...] over [best, end) becomes one run used until r.end.
    std::vector<Touched> next;
    next.reserve(touched.size() + 2);
    for (const Touched& t : touched) {
      if (t.hi <= best || t.lo >= end) {
        next.push_back(t);
        continue;
      }
      if (t.lo < best) next.push_back({t.lo, best, t.last});
      if (t.lo <= best) next.push_back({best, end, r.end});
      if (t.hi > end) next.push_back({end, t.hi, t.last});
    }
    touched.swap(next);
  }
  *total = top;
}

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
  PlaceByRecency(steps, &regions, &plan.total);
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
