"""Identity in a camera release, measured as person re-identification is measured.

Identities are the clip's tracks, as the camera pipeline's tracker follows its people. The attacker is a
re-identification network (sdk.reid_network's omni-scale blocks) trained with an identity loss (cross-entropy over
the training tracks) and a metric loss (batch-hard triplet, Hermans et al. 2017) on the RAW crops of the training
tracks only. Test tracks are disjoint from them: a track seen in the training part of the clip is left out of
the test. A track is not a person: one whose track breaks, or who leaves and comes back, is a new track, so a
test track can be a person the attacker trained on (scripts/identity_ground_truth.py counts them against a
clip's ground truth, docs/identity_ground_truth.md; ``identities`` in the result says which kind it holds).

Each test person's crops alternate between a gallery (raw crops, the attacker's photographs of them) and
queries: the crops released at that person's place and time. For every query the attacker ranks the gallery
by cosine similarity; rank-1 is whether its best match is the right person, mAP the average precision of the
ranking (the Market-1501 protocol, Zheng et al. 2015), each averaged per test person and then over people, with a
95% interval from a bootstrap over people (sdk.reid_figures: each person weighs once, so chance is 1/N). The same
attacker on RAW queries is the audit's power: below RAW_RANK1_FLOOR it cannot tell people apart even
unprivatized, and the audit says "no power" rather than a verdict.

The audit runs in two folds (decision 0027): the clip's first part trains the attacker and its second part's
people are tested, then the other way round, each fold with its own attacker. Every track seen in one part only is
a test person once, and the verdict is read on the folds' people pooled. In the second fold the test people are
the ones the bundle was trained on: a mechanism that remembered its training people would show it there.

The attacker compares silhouettes with their clothing, like with like: every crop (gallery, raw and released
queries, training) is cut out by its person mask, 0 elsewhere, because a camera release pastes cut-out people
into the empty scene: the background of a released crop is no evidence of who it is. Crops are compared as the
release shows them: in colour where a colour camera's release pastes colour substitutes, in grey otherwise.

Two more measurements sit beside it:

* the bank: an attacker holding raw crops of the people a bank could have been cut from (the camera's
  training people) looks for them among the released substitutes. A substitute "found" is one whose best
  match is closer than the threshold at which FALSE_MATCH_RATE of raw test people (who are in no gallery) would
  be found. A bank cut from the clip is found (the test's power); rendered walkers should be found at about
  the false-match rate.
* multi-shot: video re-identification pools a person's frames (the MARS protocol, Zheng et al. 2016, with
  mean pooling). Each test person's released crops are pooled into one feature and ranked against each test
  person's pooled raw gallery, one query per person against chance 1/N; the same pooling of their raw queries
  is its power. The audit draws every released crop afresh, so the pool holds as many independent draws as
  the person has queries; a device holds a draw while it tracks the person (a few per person,
  benchmarks.direction_check), so this attacker sees more draws than a device shows and its figure bounds the
  device's from above.
* trajectory linkage: the release keeps each person's box and timing by design. An attacker who holds
  timestamped raw crops of the same camera links each released box to the gallery crop nearest in time and
  place; this is measured on the release's timeline alone, and is the same for any mechanism.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from sensorveil.sdk.reid_figures import (
    chance_scores,
    figures_from_similarity,
    grouped_interval,
    multi_shot,
    pool_folds,
    trajectory_linkage,
)
from sensorveil.sdk.reid_network import omni_scale_reid

RAW_RANK1_FLOOR = 0.40        # the attacker must re-identify raw queries at least this often to have power
CHANCE_FACTOR = 2.0           # the goal: released rank-1 within this factor of chance
INTERVAL_POINTS = 0.05        # a rank-1 interval wider than +-5 points: too few queries for a verdict
FALSE_MATCH_RATE = 0.05       # the bank test's threshold: this share of raw strangers would be "found"


def cut_out(crops: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Crops with everything but the person set to 0 (a released cut-out already is); grey (N, H, W) or colour
    (N, H, W, 3) crops, (N, H, W) masks."""
    return np.where(masks if crops.ndim == 3 else masks[..., None], crops, 0).astype(np.uint8)


def channels_first(crops: np.ndarray) -> np.ndarray:
    """(N, C, H, W) for the network: grey (N, H, W) gets one channel, colour (N, H, W, 3) its three."""
    return crops[:, None] if crops.ndim == 3 else crops.transpose(0, 3, 1, 2)


def person_crops(dataset, rows: np.ndarray, colour: bool) -> np.ndarray:
    """The raw crops of ``rows`` cut out by their person masks, in colour or grey."""
    return cut_out((dataset.colour if colour else dataset.x)[rows], dataset.foreground[rows])


def identity_split(track: np.ndarray, split: np.ndarray) -> tuple:
    """(training people's rows, test people's gallery rows, test people's query rows): training people are the
    tracks of the clip's training part; test people the tracks seen only in its test part, with at least two
    crops, their crops alternating gallery, query in frame order."""
    train_tracks = set(track[split == 0].tolist())
    train = np.flatnonzero((split == 0))
    gallery, query = [], []
    for t in np.unique(track[split == 1]):
        if t in train_tracks:
            continue
        rows = np.flatnonzero((track == t) & (split == 1))
        if len(rows) >= 2:
            gallery.append(rows[0::2])
            query.append(rows[1::2])
    if not query:
        return train, np.zeros(0, np.int64), np.zeros(0, np.int64)
    return train, np.concatenate(gallery), np.concatenate(query)


def folds(split: np.ndarray) -> tuple:
    """The split of each fold: the clip's own (first part trains), then its two parts swapped (the second part
    trains); rows of neither part (a bank's, split 2) stay out of both."""
    return split, np.where(split < 2, 1 - split, split)


def train_attacker(crops: np.ndarray, identities: np.ndarray, epochs: int, seed: int, log=None) -> torch.nn.Module:
    """The re-id network trained on raw (cut-out) crops of the training people, grey or colour (``cut_out``'s
    shapes): cross-entropy over their identities plus a batch-hard triplet loss on the L2-normalised features
    (P people x K crops a batch). Returns the feature extractor (the network without its classifier)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    ids, labels = np.unique(identities, return_inverse=True)
    x = torch.as_tensor(channels_first(crops), dtype=torch.float32) / 255.0
    network = omni_scale_reid(x.shape[1], len(ids))
    features, classifier = network[:-1], network[-1]
    optimiser = torch.optim.AdamW(network.parameters(), lr=2e-3, weight_decay=5e-4)
    by_person = [np.flatnonzero(labels == k) for k in range(len(ids))]
    steps = max(len(crops) // 64, 1)
    for epoch in range(int(epochs)):
        network.train()
        for _ in range(steps):
            people = rng.choice(len(ids), size=min(16, len(ids)), replace=False)
            rows = np.concatenate([rng.choice(by_person[p], size=4, replace=len(by_person[p]) < 4) for p in people])
            batch = x[rows]
            batch = torch.where(torch.rand(len(rows), 1, 1, 1) < 0.5, batch.flip(3), batch)   # facing either way
            feats = features(batch)
            target = torch.as_tensor(labels[rows])
            loss = F.cross_entropy(classifier(feats), target) + batch_hard_triplet(F.normalize(feats), target)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        if log is not None:
            log(f"re-id attacker: epoch {epoch + 1} of {epochs}, loss {float(loss.detach()):.3f}")
    return features.eval()


def batch_hard_triplet(features: torch.Tensor, labels: torch.Tensor, margin: float = 0.3) -> torch.Tensor:
    """For each anchor its farthest same person and nearest other person (Hermans et al. 2017)."""
    distance = torch.cdist(features, features)
    same = labels[:, None] == labels[None, :]
    hardest_positive = (distance * same).max(1).values
    hardest_negative = distance.masked_fill(same, float("inf")).min(1).values
    return F.relu(hardest_positive - hardest_negative + margin).mean()


def embed(features: torch.nn.Module, crops: np.ndarray) -> np.ndarray:
    """L2-normalised features of uint8 crops (grey or colour), averaged with their mirror image."""
    x = torch.as_tensor(channels_first(crops), dtype=torch.float32) / 255.0
    with torch.no_grad():
        out = [features(x[i:i + 256]) + features(x[i:i + 256].flip(3)) for i in range(0, len(x), 256)]
    return F.normalize(torch.cat(out), dim=1).numpy() if out else np.zeros((0, 1), np.float32)


def bank_search(features, dataset, train_rows: np.ndarray, released: np.ndarray, released_from: np.ndarray,
                stranger_rows: np.ndarray, seed: int, colour: bool = False) -> dict:
    """Does the release show people of this camera? The gallery: raw crops of the camera's training people
    (whom a bank cut from the clip would show). A released substitute is "found" when its best gallery match is
    closer than what FALSE_MATCH_RATE of strangers (raw test people, in no gallery) reach. ``released_from``:
    the dataset row each substitute was cut from (a bank row; its track is the truth where it is a real person
    of the clip); rank-1 is computed over the substitutes whose source is a gallery person."""
    track = dataset.attributes["track"]
    gallery = embed(features, person_crops(dataset, train_rows, colour))
    strangers = embed(features, person_crops(dataset, stranger_rows, colour))
    found_by = np.quantile((strangers @ gallery.T).max(1), 1.0 - FALSE_MATCH_RATE)
    shown = embed(features, released)
    best = (shown @ gallery.T).max(1)
    found = best > found_by
    result = {"false_match_rate": FALSE_MATCH_RATE, "substitutes": int(len(released)),
              "found": grouped_interval(found.astype(float), released_from, seed)}
    source = track[released_from]
    in_gallery = np.isin(source, track[train_rows]) & (dataset.attributes["trial_split"][released_from] == 0)
    if in_gallery.any():      # substitutes cut from gallery people: rank-1 against the rows they were not cut from
        sim = shown[in_gallery] @ gallery.T
        sim[train_rows[None, :] == released_from[in_gallery][:, None]] = -np.inf    # not the very same crop
        result["rank1_of_clip_people"] = figures_from_similarity(sim, source[in_gallery], track[train_rows], seed)
    return result


def verdict(raw: dict, released: dict, chance: dict, bank: dict | None = None,
            pooled_shots: dict | None = None, identities: str = "tracks") -> tuple:
    """("protects" | "leaks" | "no power" | "no verdict", why): protects only when the attacker has power, the
    interval is tight enough, released rank-1 is within CHANCE_FACTOR x chance and no more substitutes are
    found among the camera's people than strangers would be. Leaks when the bank shows bystanders, or when the
    released rank-1's whole interval lies above CHANCE_FACTOR x chance: too few test people for a tight interval
    withholds "protects", never a leak the interval already shows, and neither does an attacker short of the
    power floor on raw crops (power is what "protects" needs; re-identifying the release above chance is itself
    the power a leak needs). ``pooled_shots`` (multi_shot's figures): a leak too when its released rank-1's whole
    interval lies above CHANCE_FACTOR x its chance, once the pooled raw queries re-identify above that bound (its
    own power). ``identities``: what the test identities are ("tracks", or a ground truth's people), named where
    too few of them withhold a verdict."""
    if bank is not None and bank["found"]["low"] > bank["false_match_rate"]:
        return "leaks", (f"{bank['found']['mean']:.1%} of the released substitutes are found among this camera's "
                         f"own people (strangers: {bank['false_match_rate']:.0%}): the bank shows bystanders")
    raw_rank1, rank1 = raw["rank1"], released["rank1"]
    bound = CHANCE_FACTOR * chance["rank1"]
    if rank1["low"] > bound:     # the whole interval above the goal: a leak however few the test people
        return "leaks", (f"released rank-1 {rank1['mean']:.1%} [{rank1['low']:.1%}, {rank1['high']:.1%}] is above "
                         f"{CHANCE_FACTOR:g}x chance ({bound:.1%}) across its interval")
    if pooled_shots is not None and _pooled_leak(pooled_shots):
        pooled_rank1, pooled_bound = pooled_shots["released"]["rank1"], CHANCE_FACTOR * pooled_shots["chance"]["rank1"]
        return "leaks", (f"pooling each person's released crops re-identifies them at rank-1 "
                         f"{pooled_rank1['mean']:.1%} [{pooled_rank1['low']:.1%}, {pooled_rank1['high']:.1%}], "
                         f"above {CHANCE_FACTOR:g}x its chance ({pooled_bound:.1%}) across its interval")
    if raw_rank1["mean"] < RAW_RANK1_FLOOR or raw_rank1["low"] <= bound:
        return "no power", (f"the attacker re-identifies raw queries at rank-1 {raw_rank1['mean']:.1%} "
                            f"[{raw_rank1['low']:.1%}, {raw_rank1['high']:.1%}], needs >= {RAW_RANK1_FLOOR:.0%}")
    half_width = (rank1["high"] - rank1["low"]) / 2
    if half_width > INTERVAL_POINTS:
        return "no verdict", f"too few test {identities}: the released rank-1 interval is +-{half_width:.1%}"
    if rank1["mean"] <= bound:
        return "protects", f"released rank-1 {rank1['mean']:.1%} is within {CHANCE_FACTOR:g}x chance ({bound:.1%})"
    return "leaks", f"released rank-1 {rank1['mean']:.1%} is above {CHANCE_FACTOR:g}x chance ({bound:.1%})"


def _pooled_leak(pooled_shots: dict) -> bool:
    bound = CHANCE_FACTOR * pooled_shots["chance"]["rank1"]
    return pooled_shots["raw"]["rank1"]["low"] > bound and pooled_shots["released"]["rank1"]["low"] > bound


def fold_audit(dataset, released_query: np.ndarray, released_from: np.ndarray | None, query_rows: np.ndarray,
               gallery_rows: np.ndarray, train_rows: np.ndarray, epochs: int = 15, seed: int = 0, log=None,
               bank: bool = True, colour: bool = False) -> dict:
    """One fold's figures. ``released_query``: the crops released at ``query_rows`` (uint8, cut out);
    ``released_from``: the dataset row each was cut from (substitution bundles), or None (a generated crop);
    ``bank``: whether this fold also searches the release for the camera's own people; ``colour``: whether
    the crops compared are colour, as the released ones are."""
    track = dataset.attributes["track"]
    features = train_attacker(person_crops(dataset, train_rows, colour), track[train_rows], epochs, seed, log)
    gallery = embed(features, person_crops(dataset, gallery_rows, colour))
    query_ids, gallery_ids = track[query_rows], track[gallery_rows]
    raw_queries = embed(features, person_crops(dataset, query_rows, colour))
    released_queries = embed(features, released_query)
    result = {"raw": figures_from_similarity(raw_queries @ gallery.T, query_ids, gallery_ids, seed),
              "released": figures_from_similarity(released_queries @ gallery.T, query_ids, gallery_ids, seed),
              "chance": chance_scores(query_ids, gallery_ids, seed),
              "training_people": int(len(np.unique(track[train_rows]))),
              "multi_shot": multi_shot(gallery, gallery_ids, raw_queries, released_queries, query_ids, seed)}
    if dataset.timeline is not None:
        result["trajectory_linkage"] = trajectory_linkage(dataset.timeline, gallery_rows, query_rows, track, seed)
    if released_from is not None and bank:
        result["bank"] = bank_search(features, dataset, train_rows, released_query, released_from, query_rows, seed,
                                     colour)
    return result


def identity_audit(dataset, release, epochs: int = 15, seed: int = 0, log=None, identities: str = "tracks",
                   keep: np.ndarray | None = None) -> dict:
    """The whole identity audit, both folds pooled. ``release(query_rows)``: (the crops released at those rows,
    the dataset row each was cut from or None); the attacker compares crops as the release shows them, colour
    (N, H, W, 3) or grey (N, H, W): clothing colour is a person's strongest cue, and a grey release has none to
    show; ``identities``: what the dataset's "track" attribute holds
    ("tracks", or a ground truth's people); ``keep``: rows that may take part (all by default). The bank search
    runs on the first fold, whose training people a bank cut from the clip is drawn from."""
    track, results, colour = dataset.attributes["track"], [], False
    for fold, split in enumerate(folds(dataset.attributes["trial_split"])):
        rows = identity_split(track, split)
        train, gallery, query = rows if keep is None else (r[keep[r]] for r in rows)
        if log is not None:
            log(f"identity fold {fold + 1} of 2: attacker trained on {len(np.unique(track[train]))} {identities}, "
                f"{len(np.unique(track[query]))} tested")
        if len(train) == 0 or len(query) == 0:    # a short clip: every track of one part goes on into the other
            continue
        released, released_from = release(query)
        colour = released.ndim == 4
        results.append(fold_audit(dataset, released, released_from, query, gallery, train, epochs, seed, log,
                                  bank=fold == 0, colour=colour))
    if not results:
        raise ValueError(f"the identity audit found no test {identities}: every one of them is seen in both parts "
                         f"of the clip, or a part has none; expected a clip where people come and go")
    result = {"identities": identities, "crops": "colour" if colour else "grey", **pool_folds(results, seed),
              "training_people": [r["training_people"] for r in results],
              "folds": [_fold_summary(r) for r in results],
              "attacker": f"omni-scale re-id network, cross-entropy + batch-hard triplet, {epochs} epochs on raw "
              f"cut-out {'colour' if colour else 'grey'} crops of the training people, one per fold"}
    if "bank" in results[0]:       # fold 1's, where it ran
        result["bank"] = results[0]["bank"]
    result["verdict"], result["why"] = verdict(result["raw"], result["released"], result["chance"],
                                               result.get("bank"), result["multi_shot"], identities)
    return result


def _fold_summary(result: dict) -> dict:
    return {"training_people": result["training_people"], "test_people": result["chance"]["people"],
            "queries": result["raw"]["queries"], "raw_rank1": result["raw"]["rank1"],
            "released_rank1": result["released"]["rank1"], "chance_rank1": result["chance"]["rank1"]}


def released_crops(bundle, backend: str, dataset, rows: np.ndarray, known: np.ndarray | None,
                   draw_seed: int | None = None, colour: bool = False) -> tuple:
    """(crops, source rows) the bundle releases for ``rows``, through the torch-free runtime: a substitution
    bundle's drawn cut-outs and the dataset row each was cut from; any other bundle's output samples, cut out
    by the person's own mask (what a window paste shows of them), with no source row. ``draw_seed``: the
    runtime's replayable seed for the draws (a device draws from the OS; an audit replays one draw of the same
    distribution, so its page regenerates to the same figures). ``colour``: on a colour camera, the colour
    cut-outs a substitution bundle with a colour bank pastes (as the device pastes them there); grey otherwise."""
    from sensorveil.runtime import Privatizer
    privatizer = Privatizer.load(bundle, backend=backend, seed=draw_seed)
    if privatizer.pipeline.stages[-1].kind == "substitution":
        privatizer = Privatizer.load(bundle, backend=backend, output="index", seed=draw_seed)
        draw = privatizer.pipeline.stages[-1]
        positions = np.concatenate([privatizer(dataset.x[rows[i:i + 256]],
                                               known=None if known is None else known[i:i + 256])
                                    for i in range(0, len(rows), 256)]).astype(np.int64)
        manifest = privatizer.manifest["pipeline"][-1]
        shown = manifest["bank_colour"] if colour and manifest.get("bank_colour") else manifest["bank_samples"]
        samples = np.load(privatizer.pipeline.bundle.root / shown, allow_pickle=False)
        return samples[positions].astype(np.uint8), draw.bank_indices[positions].astype(np.int64)
    out = np.concatenate([privatizer(dataset.x[rows[i:i + 256]]) for i in range(0, len(rows), 256)])
    return cut_out(np.clip(np.rint(out), 0, 255).astype(np.uint8), dataset.foreground[rows]), None


def bundle_release(bundle, dataset, backend: str = "auto", seed: int = 0):
    """``release(query_rows)`` for identity_audit: the crops the bundle releases for those rows through the
    runtime, drawn as its training run conditions the draw (PASS's known attribute), in colour where the camera
    films in colour, from the runtime's replayable ``seed``."""
    from sensorveil.sdk.assess import bundle_run_dir
    from sensorveil.sdk.mechanisms.pass_parts.bundle import SUBSTITUTION
    from sensorveil.sdk.rundir import read_run
    condition = (read_run(bundle_run_dir(bundle)).sections.get(SUBSTITUTION) or {}).get("condition")

    def release(query_rows):
        known = None if condition is None else dataset.attributes[condition][query_rows]
        return released_crops(bundle, backend, dataset, query_rows, known, draw_seed=seed,
                              colour=dataset.colour is not None)
    return release


def audit_bundle(bundle, backend: str = "auto", epochs: int = 15, seed: int = 0, log=None) -> dict:
    """The identity audit of a camera bundle exactly as the device draws: its training run's clip, people
    disjoint by track, the release from the runtime. ``seed``: the attacker's training, the intervals' bootstrap
    and the release's draws (replayed from the runtime's seed), so one seed gives one set of figures."""
    from sensorveil.sdk.assess import bundle_run_dir
    from sensorveil.sdk.rundir import load_recorded_dataset, read_run
    run = read_run(bundle_run_dir(bundle))
    dataset = load_recorded_dataset(run.dataset)
    if dataset.foreground is None or "track" not in dataset.attributes:
        raise ValueError(f"{bundle}: the identity audit needs a camera bundle (people crops with tracks); "
                         f"its dataset is {run.dataset.name!r}")
    result = identity_audit(dataset, bundle_release(bundle, dataset, backend, seed), epochs, seed, log)
    return {"bundle": str(bundle), "test_people": result["chance"]["people"], "draw_seed": seed, **result}


def _figure(value: dict) -> str:
    return f"{value['mean']:6.1%} [{value['low']:.1%}, {value['high']:.1%}]"


def _fold_lines(fold_results: list) -> list:
    # each line under 100 columns whatever the identities are called: the table's own words stay out of it
    return [f"  fold {k + 1}: trained on {f['training_people']}, tested {f['test_people']}: raw rank-1 "
            f"{f['raw_rank1']['mean']:.1%}, released {f['released_rank1']['mean']:.1%}, chance "
            f"{f['chance_rank1']:.1%}" for k, f in enumerate(fold_results)]


def format_identity(result: dict) -> str:
    """The identity audit as a terminal table (under 100 columns) with its verdict and what it rests on."""
    chance = result["chance"]
    kind = result.get("identities", "tracks")
    lines = [f"identity: re-identification of {result['test_people']} test {kind} ({result.get('crops', 'grey')} "
             f"crops), {result['raw']['queries']} queries, in two folds:",
             *_fold_lines(result.get("folds", [])),
             f"  {'each person weighs once':<26}{'rank-1 [95%]':<26}{'mAP [95%]':<26}",
             f"  {'raw crops (power)':<26}{_figure(result['raw']['rank1']):<26}{_figure(result['raw']['mAP']):<26}",
             f"  {'released crops':<26}{_figure(result['released']['rank1']):<26}"
             f"{_figure(result['released']['mAP']):<26}",
             f"  {'chance (random ranking)':<26}{chance['rank1']:6.1%}{'':<20}{chance['mAP']:6.1%}",
             f"  verdict: {result['verdict']}: {result['why']}"]
    bank = result.get("bank")
    if bank:
        lines.append(f"  bank: {_figure(bank['found']).strip()} of {bank['substitutes']} released substitutes "
                     f"found among this camera's people")
        lines.append(f"        (a stranger is found {bank['false_match_rate']:.0%} of the time)")
        if "rank1_of_clip_people" in bank:
            lines.append(f"        cut from them: re-identified at rank-1 "
                         f"{_figure(bank['rank1_of_clip_people']['rank1']).strip()}")
    shots = result.get("multi_shot")
    if shots:
        lines.append(f"  multi-shot: the queries of each of the {shots['raw']['queries']} test {kind} pooled into one, "
                     f"chance {shots['chance']['rank1']:.1%}")
        lines.append(f"        rank-1 raw {_figure(shots['raw']['rank1']).strip()}, released "
                     f"{_figure(shots['released']['rank1']).strip()}")
    if "trajectory_linkage" in result:
        lines.append("  kept by design, each box's place and time: timestamped raw crops of this camera link")
        lines.append(f"        a released box to its person at rank-1 "
                     f"{_figure(result['trajectory_linkage']['rank1']).strip()}")
    return "\n".join(lines)
