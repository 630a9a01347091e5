// Hierarchical all-reduce (Horovod's hierarchical mode, BlueConnect): a ring
// reduce-scatter inside each rack, an all-reduce of each shard across racks
// among the ranks holding it, a ring all-gather inside each rack. Only the
// middle phase crosses racks, and it moves each byte of the vector through
// the uplinks 2(R-1)/R times instead of a rack-order ring's 2(N-1)/N per hop.
//
// Racks may differ in size. Rack R of k ranks cuts the vector into k chunks
// (chunking.h); the union of all racks' chunk boundaries cuts it into pieces
// that have exactly one holder in every rack. Each piece is ring-all-reduced
// among its R holders. Pieces whose holders overlap cannot share a round (one
// send per peer per round, schedule.h), so pieces are dealt into waves in
// which no rank holds two; racks of equal size need one wave.
//
// Rounds, equal on every rank: (K-1) + waves * 2(R-1) + (K-1), K the largest
// rack (HierarchicalRounds). Racks of equal size need one wave; unequal ones
// need as many as the chunk boundaries of `count` make, so the rounds depend
// on the count there. Wire: 2(N-1)M in total for any rack shapes, 2(R-1)M of
// it across racks.
#include <algorithm>
#include <set>
#include <vector>

#include "allreduce/chunking.h"
#include "allreduce/collectives.h"

namespace testbed {
namespace {

// A contiguous range of elements and the rank holding it in each rack.
struct Piece {
  std::int64_t offset;
  std::int64_t count;
  std::vector<int> holders;  // one per rack, in rack order
  int wave = 0;
};

// Appends `rounds` rounds of `local` (a schedule over a group's local ranks)
// to `out`, its peers mapped to global ranks and its ranges moved by
// `offset`; rounds `local` lacks are appended empty.
void AppendMapped(Schedule& out, const Schedule* local, const std::vector<int>& global,
                  std::int64_t offset, int rounds, std::string_view phase) {
  for (int i = 0; i < rounds; ++i) {
    Round& round = out.AddRound(phase);
    if (local == nullptr || i >= static_cast<int>(local->rounds.size())) continue;
    for (const Step& step : local->rounds[static_cast<std::size_t>(i)].steps) {
      round.steps.push_back(Step{step.kind, global[static_cast<std::size_t>(step.peer)],
                                 step.offset + offset, step.count});
    }
  }
}

std::vector<Piece> CutIntoPieces(std::int64_t count, const std::vector<std::vector<int>>& racks) {
  std::set<std::int64_t> bounds{0, count};
  for (const std::vector<int>& members : racks) {
    const int k = static_cast<int>(members.size());
    for (int i = 0; i < k; ++i) bounds.insert(ChunkOf(count, k, i).offset);
  }
  std::vector<Piece> pieces;
  for (auto it = bounds.begin(); std::next(it) != bounds.end(); ++it) {
    Piece piece{*it, *std::next(it) - *it, {}};
    for (const std::vector<int>& members : racks) {
      const int k = static_cast<int>(members.size());
      piece.holders.push_back(members[static_cast<std::size_t>(ChunkOwner(count, k, *it))]);
    }
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

// Deals pieces into waves, first fit, so that no rank holds two pieces of one
// wave. Returns the number of waves.
int DealIntoWaves(std::vector<Piece>& pieces, int world_size) {
  std::vector<std::vector<bool>> wave_taken(static_cast<std::size_t>(world_size));
  int waves = 0;
  for (Piece& piece : pieces) {
    const auto taken = [&](int w) {
      return std::any_of(piece.holders.begin(), piece.holders.end(), [&](int h) {
        const std::vector<bool>& of = wave_taken[static_cast<std::size_t>(h)];
        return w < static_cast<int>(of.size()) && of[static_cast<std::size_t>(w)];
      });
    };
    while (taken(piece.wave)) ++piece.wave;
    for (int h : piece.holders) {
      std::vector<bool>& of = wave_taken[static_cast<std::size_t>(h)];
      if (static_cast<int>(of.size()) <= piece.wave) of.resize(static_cast<std::size_t>(piece.wave) + 1);
      of[static_cast<std::size_t>(piece.wave)] = true;
    }
    waves = std::max(waves, piece.wave + 1);
  }
  return waves;
}

// The racks, the largest one's size and the pieces dealt into waves: what
// the schedule is cut from, and what its rounds are counted from.
struct Layout {
  std::vector<std::vector<int>> racks;
  int largest = 0;
  std::vector<Piece> pieces;
  int waves = 0;

  Layout(int world_size, std::int64_t count, const Placement& placement)
      : racks(placement.Members(world_size)), pieces(CutIntoPieces(count, racks)) {
    for (const std::vector<int>& members : racks) {
      largest = std::max(largest, static_cast<int>(members.size()));
    }
    waves = DealIntoWaves(pieces, world_size);
  }
  int rack_count() const { return static_cast<int>(racks.size()); }
  // Each inter-rack wave is a ring all-reduce among one holder per rack.
  int wave_rounds() const { return 2 * (rack_count() - 1); }
  int rounds() const { return 2 * (largest - 1) + waves * wave_rounds(); }
};

}  // namespace

int HierarchicalRounds(int world_size, std::int64_t count, const Placement& placement) {
  return Layout(world_size, count, placement).rounds();
}

Schedule BuildAllReduceHierarchical(int rank, int world_size, std::int64_t count,
                                    const Placement& placement) {
  Schedule s{rank, world_size, count, {}};
  const Layout layout(world_size, count, placement);
  const std::vector<int>& mine = layout.racks[static_cast<std::size_t>(placement.RackOf(rank))];
  const int local = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  const int k = static_cast<int>(mine.size());

  const Schedule scatter = BuildReduceScatterRing(local, k, count);
  AppendMapped(s, &scatter, mine, 0, layout.largest - 1, "intra-rack reduce-scatter");

  std::vector<const Piece*> held_in_wave(static_cast<std::size_t>(layout.waves), nullptr);
  for (const Piece& piece : layout.pieces) {
    if (std::find(piece.holders.begin(), piece.holders.end(), rank) != piece.holders.end()) {
      held_in_wave[static_cast<std::size_t>(piece.wave)] = &piece;
    }
  }
  for (const Piece* held : held_in_wave) {
    if (held == nullptr) {
      AppendMapped(s, nullptr, {}, 0, layout.wave_rounds(), "inter-rack all-reduce");
      continue;
    }
    const int position = static_cast<int>(
        std::find(held->holders.begin(), held->holders.end(), rank) - held->holders.begin());
    const Schedule across = BuildAllReduceRing(position, layout.rack_count(), held->count);
    AppendMapped(s, &across, held->holders, held->offset, layout.wave_rounds(),
                 "inter-rack all-reduce");
  }

  const Schedule gather = BuildAllGatherRing(local, k, count);
  AppendMapped(s, &gather, mine, 0, layout.largest - 1, "intra-rack all-gather");
  return s;
}

}  // namespace testbed
