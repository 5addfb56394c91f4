"""Object-detection scores: proposals, anchors, queries and their post-processing."""
import math

import torch

from .registry import distribution
from .toolkit import normal, rows_and_length, smooth_field, uniform

OBJECTNESS_MEAN, OBJECTNESS_STD = -4.0, 2.2
OBJECT_BLOBS = 10              # objects per image
BLOB_RADIUS_PX = (3.0, 15.0)
BLOB_NATS = (6.0, 12.0)        # lifts the logits inside an object above zero


@distribution("objectness")
def _objectness(shape, params, rng):
    """RPN objectness logits in (H, W, anchors) order: mostly negative, spatially smooth,
    a few positive blobs where objects are."""
    images = shape[0]
    height, width, anchors = params["hwa"]
    logits = OBJECTNESS_MEAN + OBJECTNESS_STD * smooth_field((images, anchors, height, width), rng)
    ys = torch.arange(height, dtype=torch.float32).view(1, 1, -1, 1)
    xs = torch.arange(width, dtype=torch.float32).view(1, 1, 1, -1)
    for _ in range(OBJECT_BLOBS):
        centre_y = uniform((images, 1, 1, 1), rng, 0, height)
        centre_x = uniform((images, 1, 1, 1), rng, 0, width)
        radius = uniform((images, 1, 1, 1), rng, *BLOB_RADIUS_PX)
        lift = uniform((images, anchors, 1, 1), rng, *BLOB_NATS)
        squared_distance = (ys - centre_y).square() + (xs - centre_x).square()
        logits += lift * torch.exp(-squared_distance / (2 * radius.square()))
    return logits.permute(0, 2, 3, 1).reshape(shape)


CANDIDATES_PER_LEVEL = 1000  # RetinaNet's topk_candidates
DETECTION_LOGIT_MEAN, DETECTION_LOGIT_STD = -2.0, 1.5


@distribution("nms_scores")
def _nms_scores(shape, params, rng):
    """Per-level top-k outputs concatenated: runs of CANDIDATES_PER_LEVEL descending scores."""
    scores = normal(shape, rng, DETECTION_LOGIT_MEAN, DETECTION_LOGIT_STD).sigmoid_()
    runs = scores.split(CANDIDATES_PER_LEVEL)
    return torch.cat([run.sort(descending=True).values for run in runs])


BACKGROUND_LOSS_MEAN = 0.05
POSITIVE_ANCHORS = (5, 60)   # per image


@distribution("hardneg_loss")
def _hardneg_loss(shape, params, rng):
    """SSD's background cross-entropy per anchor (small, exponential), positives set to -inf."""
    images, anchors = shape
    loss = torch.rand(shape, generator=rng).log_().neg_().mul_(BACKGROUND_LOSS_MEAN)
    positive_fraction = uniform((images, 1), rng, *POSITIVE_ANCHORS) / anchors
    positive = torch.rand(shape, generator=rng) < positive_fraction
    return loss.masked_fill(positive, float("-inf"))


QUERY_LOGIT_MEAN, QUERY_LOGIT_STD = -5.5, 1.2
DUPLICATE_QUERIES = 4          # queries that latch onto one object
OBJECT_LOGITS = (-1.0, 4.0)


@distribution("sigmoid_det")
def _sigmoid_det(shape, params, rng):
    """RT-DETR sigmoid scores over (queries x classes): low bulk, n_obj objects each picked
    up by a few queries with one class."""
    images, flat = shape
    queries, n_obj = params["num_queries"], params["n_obj"]
    classes = flat // queries
    logits = normal((images, queries, classes), rng, QUERY_LOGIT_MEAN, QUERY_LOGIT_STD).view(images, flat)
    query = torch.randint(0, queries, (images, n_obj, DUPLICATE_QUERIES), generator=rng)
    label = torch.randint(0, classes, (images, n_obj, 1), generator=rng)
    slots = (query * classes + label).view(images, -1)
    logits.scatter_(1, slots, uniform(tuple(slots.shape), rng, *OBJECT_LOGITS))
    return logits.sigmoid_()


DETECTION_CLASSES = 80         # COCO
ANCHOR_LOGIT_MEAN, ANCHOR_LOGIT_STD = -7.0, 1.5
OBJECT_ANCHOR_FRACTION = 0.02
OBJECT_ANCHOR_NATS = (4.0, 10.0)


@distribution("max_class_logit")
def _max_class_logit(shape, params, rng):
    """YOLO per-anchor max over classes of sigmoid class scores; ~2% of anchors on objects."""
    rows, anchors = rows_and_length(shape)
    best = normal((rows, anchors, DETECTION_CLASSES), rng, ANCHOR_LOGIT_MEAN, ANCHOR_LOGIT_STD).amax(-1)
    on_object = torch.rand((rows, anchors), generator=rng) < OBJECT_ANCHOR_FRACTION
    best += on_object * uniform((rows, anchors), rng, *OBJECT_ANCHOR_NATS)
    return best.sigmoid_().view(shape)


IMAGE_SIZE = 640
ANCHOR_STRIDES = (8, 16, 32)
BOX_SIDE_FRACTION = (0.03, 0.3)  # ground-truth box sides, log-uniform, of the image size
ALIGN_ALPHA, ALIGN_BETA = 0.5, 6.0  # ultralytics TaskAlignedAssigner
PREDICTED_SCORE_RANGE = (0.01, 0.9)  # of anchors inside a box
PREDICTED_IOU_RANGE = (0.05, 0.95)


def anchor_centres():
    """(x, y) float32 [anchors] of a YOLOv8 head's anchor points at 640x640."""
    xs, ys = [], []
    for stride in ANCHOR_STRIDES:
        cells = (torch.arange(IMAGE_SIZE // stride, dtype=torch.float32) + 0.5) * stride
        grid_y, grid_x = torch.meshgrid(cells, cells, indexing="ij")
        xs.append(grid_x.flatten())
        ys.append(grid_y.flatten())
    return torch.cat(xs), torch.cat(ys)


@distribution("tal_metric")
def _tal_metric(shape, params, rng):
    """TaskAlignedAssigner's score**0.5 * IoU**6 per (image, ground truth, anchor): exactly 0
    outside the boxes and on padded ground-truth rows."""
    images, max_boxes, anchors = shape
    x, y = anchor_centres()
    assert x.numel() == anchors, "tal_metric expects YOLOv8's 8400 anchors of a 640 image"
    box_shape = (images, max_boxes, 1)
    log_low, log_high = (math.log(f * IMAGE_SIZE) for f in BOX_SIDE_FRACTION)
    width = uniform(box_shape, rng, log_low, log_high).exp_()
    height = uniform(box_shape, rng, log_low, log_high).exp_()
    left = uniform(box_shape, rng) * (IMAGE_SIZE - width)
    top = uniform(box_shape, rng) * (IMAGE_SIZE - height)
    inside = (x >= left) & (x <= left + width) & (y >= top) & (y <= top + height)
    n_boxes = torch.randint(1, max_boxes + 1, (images, 1, 1), generator=rng)
    real = torch.arange(max_boxes).view(1, -1, 1) < n_boxes
    score = uniform(shape, rng, *PREDICTED_SCORE_RANGE)
    iou = uniform(shape, rng, *PREDICTED_IOU_RANGE)
    metric = score.pow(ALIGN_ALPHA) * iou.pow(ALIGN_BETA)
    return metric * (inside & real)


CONFIDENT_QUERIES = 15
CONFIDENT_NATS = (6.0, 10.0)
NO_OBJECT_NATS = (4.0, 8.0)


@distribution("mask2former_scores")
def _mask2former_scores(shape, params, rng):
    """Per-query class softmax with the no-object column dropped, flattened: ~15 confident
    entries, the rest tiny."""
    queries = params["num_queries"]
    classes = shape[0] // queries
    logits = normal((queries, classes + 1), rng)
    confident = torch.randperm(queries, generator=rng)[:CONFIDENT_QUERIES]
    label = torch.randint(0, classes, (CONFIDENT_QUERIES,), generator=rng)
    logits[:, -1] += uniform((queries,), rng, *NO_OBJECT_NATS)
    logits[confident, -1] -= NO_OBJECT_NATS[1]
    logits[confident, label] += uniform((CONFIDENT_QUERIES,), rng, *CONFIDENT_NATS)
    return torch.softmax(logits, -1)[:, :-1].reshape(shape)
